/**
 * The main thread's side of admission and scheduling. The common case costs
 * no message: while nothing waits ahead for a request's pool and its band's
 * published limit has room, the main thread claims a place in the pool with
 * one compare-and-swap and chooses the endpoint itself (the same chooser the
 * worker runs, over the same shared tables). Only a saturated pool, something
 * already queued there, or a lost race sends the request to the scheduler
 * worker, which queues it and answers with a grant or a rejection. A request
 * whose client leaves while it waits is cancelled in the worker at once; a
 * grant that raced the cancel has its claim returned.
 */
import type { EndpointChooser, RoutingKeys } from "../admission/chooser.ts";
import type { EndpointDirectory } from "../admission/endpoint-directory.ts";
import { fastAdmit } from "../admission/fast-path.ts";
import type { Config } from "../config/types.ts";
import type { EndpointDescriptor, FromScheduler, GrantDetail, ToScheduler } from "../protocol/scheduler-messages.ts";
import type { SchedulingProfile } from "../scheduling/profile.ts";
import { type EndpointTable, I, type PoolTable } from "../shared/endpoint-table.ts";
import { LlmgwError } from "../shared/errors.ts";
import type { AdapterCatalog } from "./adapter-catalog.ts";

/** What a claim added to its endpoint's prefill load and has not yet taken off (0 once it has). */
interface PrefillClaim {
  prefillTokens: number;
}

/** An endpoint claimed for a request: its slot and pool, and how the decision was reached. */
export interface Grant extends GrantDetail {
  index: number;
  pool: number;
  /** "fast": decided on the main thread; "queued": by the scheduler worker. */
  path: "fast" | "queued";
}

export interface AdmitRequest {
  model: string;
  band: number;
  tenant: string;
  estTokens: number;
  prefixHashes: readonly number[];
  /** Token-block keys of the prompt, when it was tokenized (precise-prefix). */
  tokenBlockKeys?: readonly number[];
  /** The prompt's estimated tokens (the prefill-load signal). */
  promptTokens?: number;
}

/** A rejection from admission, with what the metrics need. */
export class SchedulerRejection extends LlmgwError {
  constructor(
    code: ConstructorParameters<typeof LlmgwError>[0],
    message: string,
    readonly waitedMs: number,
    retryAfterS: number | undefined,
    readonly drops: Readonly<Record<string, number>> = {},
  ) {
    super(code, message, retryAfterS === undefined ? {} : { retryAfterS });
  }
}

type Pending = { resolve: (g: Grant) => void; reject: (e: LlmgwError) => void };
type MessageKind = ToScheduler["type"];

const WORKER_URL = new URL("../../workers/scheduler.ts", import.meta.url);

/** What the worker is started with (the init message without its tag). */
type SchedulerInit = Omit<Extract<ToScheduler, { type: "init" }>, "type">;

export class AdmissionClient {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private readonly ready: Promise<void>;
  /** Messages posted to the worker, by kind (a metric: the fast path posts none). */
  readonly posted: Record<MessageKind, number> = { init: 0, endpoint: 0, models: 0, scheduling: 0, admit: 0, cancel: 0, release: 0 };

  constructor(
    init: SchedulerInit,
    private readonly table: EndpointTable,
    private readonly pools: PoolTable,
    private readonly directory: EndpointDirectory,
    private readonly chooser: EndpointChooser,
    private readonly admission: Config["admission"],
    /** A grant arrived for a request that was already abandoned (its claim is returned here first). */
    private readonly onOrphanGrant: (index: number, probe: number) => void,
    /** LoRA adapters: a request naming one is routed among its base's endpoints. */
    private readonly adapters?: AdapterCatalog,
  ) {
    this.worker = new Worker(WORKER_URL.href);
    let markReady: () => void = () => {};
    this.ready = new Promise((r) => (markReady = r));
    this.worker.onmessage = (event: MessageEvent<FromScheduler>) => {
      const msg = event.data;
      switch (msg.type) {
        case "ready":
          markReady();
          return;
        case "grant": {
          const p = this.take(msg.id);
          if (!p) {
            this.release(msg, msg.band);
            if (msg.probe >= 0) this.onOrphanGrant(msg.index, msg.probe);
            return;
          }
          p.resolve({
            index: msg.index,
            pool: msg.pool,
            scores: msg.scores,
            drops: msg.drops,
            candidates: msg.candidates,
            waitedMs: msg.waitedMs,
            probe: msg.probe,
            circuit: msg.circuit,
            prefillTokens: msg.prefillTokens,
            path: "queued",
          });
          return;
        }
        case "reject":
          this.take(msg.id)?.reject(new SchedulerRejection(msg.error.code, msg.error.message, msg.waitedMs, msg.error.retryAfterS, msg.drops));
          return;
        default: {
          const unreachable: never = msg;
          throw new Error(`unknown scheduler message ${JSON.stringify(unreachable)}`);
        }
      }
    };
    this.post({ type: "init", ...init });
  }

  whenReady(): Promise<void> {
    return this.ready;
  }

  private take(id: number): Pending | undefined {
    const p = this.pending.get(id);
    this.pending.delete(id);
    return p;
  }

  private post(msg: ToScheduler): void {
    this.posted[msg.type]++;
    this.worker.postMessage(msg);
  }

  /** An endpoint took a slot (or left it, with undefined). */
  setEndpoint(index: number, d: EndpointDescriptor | undefined): void {
    this.directory.set(index, d);
    this.post({ type: "endpoint", index, descriptor: d ?? null });
  }

  /** Scheduling settings of a reloaded config, here (the fast path) and in the worker. */
  setScheduling(scheduling: Config["scheduling"], profile: SchedulingProfile): void {
    this.chooser.useProfile(profile);
    this.post({ type: "scheduling", scheduling });
  }

  setModels(index: number, models: string[]): void {
    this.directory.setModels(index, models);
    this.post({ type: "models", index, models });
  }

  /**
   * A new request: a grant at once (fast path), or a promise of one from the
   * scheduler worker. Throws (or rejects with) SchedulerRejection.
   */
  admit(req: AdmitRequest, signal: AbortSignal, fastPath = true): Grant | Promise<Grant> {
    const target = this.target(req.model);
    const pool = this.directory.poolOf(target.model);
    if (pool === undefined) throw new SchedulerRejection("NO_READY_ENDPOINT", `no ready endpoint serves model '${req.model}'`, 0, undefined);
    if (fastPath) {
      const f = fastAdmit(
        this.pools,
        this.chooser,
        this.admission,
        pool,
        target.adapter === undefined ? req : { ...req, model: target.model, adapter: target.adapter },
      );
      if (f.kind === "granted")
        return {
          index: f.index,
          pool: f.pool,
          scores: f.scores,
          drops: f.drops,
          candidates: f.candidates,
          waitedMs: 0,
          probe: f.probe,
          circuit: f.circuit,
          prefillTokens: f.prefillTokens,
          path: "fast",
        };
      // Nothing chosen with room in the pool (all unready, open, faulted…): the worker says the same, with the same drops.
      if (f.kind === "no_endpoint") throw new SchedulerRejection("NO_READY_ENDPOINT", `no ready endpoint serves model '${req.model}'`, 0, undefined, f.drops);
    }
    return this.queue(req, target, pool, signal);
  }

  /** The model endpoints serve and the adapter, for a request naming `model` (an adapter is served by its base). */
  private target(model: string): { model: string; adapter?: number } {
    const r = this.adapters?.route(model);
    return r === undefined ? { model } : { model: r.base, adapter: r.id };
  }

  private queue(req: AdmitRequest, target: { model: string; adapter?: number }, pool: number, signal: AbortSignal): Promise<Grant> {
    const id = this.nextId++;
    return new Promise<Grant>((resolve, reject) => {
      if (signal.aborted) return reject(new LlmgwError("INTERNAL_ERROR", "client went away"));
      const onAbort = () => {
        if (!this.pending.delete(id)) return;
        this.post({ type: "cancel", id });
        reject(new LlmgwError("INTERNAL_ERROR", "client went away"));
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.pending.set(id, {
        resolve: (g) => {
          signal.removeEventListener("abort", onAbort);
          resolve(g);
        },
        reject: (e) => {
          signal.removeEventListener("abort", onAbort);
          reject(e);
        },
      });
      this.post({
        type: "admit",
        id,
        model: target.model,
        pool,
        band: req.band,
        tenant: req.tenant,
        estTokens: req.estTokens,
        prefixHashes: req.prefixHashes,
        ...(req.tokenBlockKeys === undefined ? {} : { tokenBlockKeys: req.tokenBlockKeys }),
        ...(req.promptTokens === undefined ? {} : { promptTokens: req.promptTokens }),
        ...(target.adapter !== undefined ? { adapter: target.adapter } : {}),
      });
    });
  }

  /** The pool (its row) a model is admitted against; undefined when nothing serves it. */
  poolOf(model: string): number | undefined {
    return this.directory.poolOf(this.target(model).model);
  }

  /**
   * A retry or fallback of an admitted request: scoring only, on this thread,
   * never queued. `lastResort`: nothing is left after this model, so a
   * half-open circuit already probed by another request takes it too.
   */
  reschedule(model: string, band: number, keys: RoutingKeys, exclude: ReadonlySet<number>, lastResort = false): Grant {
    const target = this.target(model);
    const c = this.chooser.choose({ model: target.model, ...keys, exclude, lastResort, ...(target.adapter !== undefined ? { adapter: target.adapter } : {}) });
    if (!c.ok) throw new SchedulerRejection("NO_READY_ENDPOINT", `no ready endpoint serves model '${model}'`, 0, undefined, c.drops);
    this.pools.take(c.pool, band);
    return {
      index: c.index,
      pool: c.pool,
      scores: c.scores,
      drops: c.drops,
      candidates: c.candidates,
      waitedMs: 0,
      probe: c.probe,
      circuit: c.circuit,
      prefillTokens: c.prefillTokens,
      path: "fast",
    };
  }

  /** A request let go of its endpoint: the counts go down (its prefill load too, when no token took it off yet), and queued requests may move (a message only when something waits). */
  release(grant: PrefillClaim & { readonly index: number; readonly pool: number }, band: number): void {
    this.table.addInt(grant.index, I.INFLIGHT, -1);
    this.prefillDone(grant);
    this.pools.release(grant.pool, band);
    if (this.pools.queued(grant.pool) > 0) this.post({ type: "release" });
  }

  /** The grant's first token arrived: its prompt is computed, so its share of the endpoint's prefill load comes off (once). */
  prefillDone(grant: PrefillClaim & { readonly index: number }): void {
    const n = grant.prefillTokens;
    if (n === 0) return;
    grant.prefillTokens = 0;
    this.table.addInt(grant.index, I.PREFILL_TOKENS, -n);
  }

  terminate(): void {
    for (const p of this.pending.values()) p.reject(new LlmgwError("NO_READY_ENDPOINT", "gateway is shutting down"));
    this.pending.clear();
    this.worker.terminate();
  }
}
