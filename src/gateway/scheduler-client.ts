/**
 * The main thread's side of the scheduler worker: sends admit / schedule
 * requests by postMessage and resolves each with its grant (endpoint row) or
 * rejection. A request whose client leaves while it waits is cancelled in the
 * worker at once; a grant that raced the cancel has its lease returned.
 */
import type { FromScheduler, GrantDetail, ToScheduler } from "../protocol/scheduler-messages.ts";
import { LlmgwError } from "../shared/errors.ts";

export interface Grant extends GrantDetail {
  index: number;
}

/** A rejection from the worker, with what the metrics need. */
export class SchedulerRejection extends LlmgwError {
  constructor(
    code: ConstructorParameters<typeof LlmgwError>[0],
    message: string,
    readonly waitedMs: number,
    retryAfterS: number | undefined,
  ) {
    super(code, message, retryAfterS === undefined ? {} : { retryAfterS });
  }
}

type Pending = { resolve: (g: Grant) => void; reject: (e: LlmgwError) => void; onDrops: (d: Record<string, number>) => void };

const WORKER_URL = new URL("../../workers/scheduler.ts", import.meta.url);

/** What the worker is started with (the init message without its tag). */
export type SchedulerInit = Omit<Extract<ToScheduler, { type: "init" }>, "type">;

export class SchedulerClient {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private readonly ready: Promise<void>;

  /** `onOrphanGrant(index, probe)`: a grant arrived for a request that was already abandoned; return its lease (and probe slot). */
  constructor(
    init: SchedulerInit,
    private readonly onOrphanGrant: (index: number, probe: boolean) => void,
    /** Whether any admission queue holds a request (read from the shared stats table). */
    private readonly somethingQueued: () => boolean = () => true,
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
            this.onOrphanGrant(msg.index, msg.probe);
            return;
          }
          p.onDrops(msg.drops);
          p.resolve({ index: msg.index, scores: msg.scores, drops: msg.drops, waitedMs: msg.waitedMs, probe: msg.probe });
          return;
        }
        case "reject": {
          const p = this.take(msg.id);
          p?.onDrops(msg.drops);
          p?.reject(new SchedulerRejection(msg.error.code, msg.error.message, msg.waitedMs, msg.error.retryAfterS));
          return;
        }
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
    this.worker.postMessage(msg);
  }

  setModels(index: number, models: string[]): void {
    this.post({ type: "models", index, models });
  }

  private request(msg: (id: number) => ToScheduler, signal: AbortSignal, onDrops: (d: Record<string, number>) => void): Promise<Grant> {
    const id = this.nextId++;
    return new Promise<Grant>((resolve, reject) => {
      if (signal.aborted) return reject(new LlmgwError("INTERNAL_ERROR", "client went away"));
      const onAbort = () => {
        if (!this.pending.delete(id)) return;
        this.post({ type: "cancel", id });
        reject(new LlmgwError("INTERNAL_ERROR", "client went away"));
      };
      signal.addEventListener("abort", onAbort, { once: true });
      const done = () => signal.removeEventListener("abort", onAbort);
      this.pending.set(id, {
        resolve: (g) => {
          done();
          resolve(g);
        },
        reject: (e) => {
          done();
          reject(e);
        },
        onDrops,
      });
      this.post(msg(id));
    });
  }

  /** A new request: admission (may wait in its band's queue), then scoring. */
  admit(
    req: { model: string; band: number; tenant: string; estTokens: number; prefixHashes: number[] },
    signal: AbortSignal,
    onDrops: (d: Record<string, number>) => void,
  ): Promise<Grant> {
    return this.request((id) => ({ type: "admit", id, ...req }), signal, onDrops);
  }

  /** A retry of an admitted request: scoring only. */
  schedule(model: string, prefixHashes: number[], exclude: number[], signal: AbortSignal, onDrops: (d: Record<string, number>) => void): Promise<Grant> {
    return this.request((id) => ({ type: "schedule", id, model, prefixHashes, exclude }), signal, onDrops);
  }

  /** A request finished: queued ones may move (a message only when something waits). */
  release(): void {
    if (this.somethingQueued()) this.post({ type: "release" });
  }

  terminate(): void {
    for (const p of this.pending.values()) p.reject(new LlmgwError("NO_READY_ENDPOINT", "gateway is shutting down"));
    this.pending.clear();
    this.worker.terminate();
  }
}
