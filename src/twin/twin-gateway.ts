/**
 * The gateway's decisions in the fleet twin: the modules `llmgw serve` runs
 * — the shared endpoint table, the scheduling profile (filters, scorers,
 * picker) with its prefix index, the fast path and the scheduler worker's
 * admission controller (bands, queues, saturation, learned capacity), the
 * KV-block index fed by the engines' KV-cache events through the KV-events
 * worker's tracker — built from a gateway config and driven on the virtual
 * clock. What the gateway's threads would learn by polling and by events,
 * the twin writes with the same functions, after the same intervals.
 *
 * What a failing engine does to it goes through the gateway's own parts
 * too: the circuit breakers (timed on the virtual clock, probing actively),
 * the retry budget, the health poll's readiness rules for an engine that
 * refuses, the DCGM poll's GPU-fault flag and the fleet's drain flag, all
 * in the same endpoint table the choosers read. twin-request.ts takes a
 * request through the attempt loop's and the stream recovery's rules.
 *
 * Left out: the HTTP hops themselves (a request reaches its engine at the
 * instant it is granted), the main thread's and the workers' own CPU time.
 */
import { EndpointChooser, type RoutingKeys } from "../admission/chooser.ts";
import { AdmissionController } from "../admission/controller.ts";
import { EndpointDirectory } from "../admission/endpoint-directory.ts";
import { fastAdmit } from "../admission/fast-path.ts";
import { IDLE_TICK_MS, QUEUE_TICK_MS } from "../admission/worker-loop.ts";
import { DEFAULT_GPU_HEALTH_POLL_INTERVAL_MS } from "../config/defaults.ts";
import type { Config } from "../config/types.ts";
import { AdapterCatalog } from "../gateway/adapter-catalog.ts";
import { CircuitBreakers, type ProbeVerdict } from "../gateway/circuit-breaker.ts";
import { MAX_TOKEN_BLOCK_KEYS } from "../gateway/prompt-tokens.ts";
import { estimateFromWalk, promptEstimate } from "../gateway/request/token-estimate.ts";
import { RetryBudget } from "../gateway/retry-budget.ts";
import { StreamEvictions } from "../gateway/stream-evictions.ts";
import { writeLora, writeSnapshot } from "../polling/health-service.ts";
import { KvBlockTracker } from "../polling/kv-block-tracker.ts";
import { type EndpointSnapshot, INITIAL_SNAPSHOT, nextSnapshot } from "../polling/readiness.ts";
import type { EndpointDescriptor } from "../protocol/scheduler-messages.ts";
import { prefixHashes } from "../scheduling/prefix-hash.ts";
import { SchedulingProfile } from "../scheduling/profile.ts";
import { profileInputs } from "../scheduling/profile-inputs.ts";
import { walkPrompt } from "../scheduling/prompt-walk.ts";
import { tokenBlockKeys } from "../scheduling/token-blocks.ts";
import { type SharedTables, sharedTables } from "../serve/gateway-parts.ts";
import { I, modelCircuitField } from "../shared/endpoint-table.ts";
import { KV_STREAM } from "../shared/kv-event-stats.ts";
import { AdapterNames } from "../shared/lora-table.ts";
import { seededUnit } from "../shared/seeded.ts";
import type { EventQueue } from "./event-queue.ts";
import type { TwinEngine } from "./twin-engine.ts";

/** A request's hold on an endpoint: which, the circuit of its model there and the probe slot it took (-1: none), and its prefill load. */
export interface TwinGrant {
  index: number;
  pool: number;
  band: number;
  waitedMs: number;
  prefillTokens: number;
  circuit: number;
  probe: number;
}

/** Why a request got no engine (the gateway's error code), or its grant. */
type Admitted = ({ ok: true } & TwinGrant) | { ok: false; code: string; message: string };

/** An active probe's answer from an engine that is up: one short step. */
const PROBE_ANSWER_MS = 20;

interface Pending {
  resolve(a: Admitted): void;
}

interface TwinGatewayOptions {
  config: Config;
  /** Slot i of the endpoint table is engines[i]. */
  engines: readonly TwinEngine[];
  model: string;
  clock: EventQueue;
  seed: number;
  /** From an engine's step to the KV-block index having its events (publish, ZMQ, the worker's apply). */
  kvEventDelayMs: number;
  /** The endpoints are configured to follow the engines' KV-cache events. */
  followKvEvents: boolean;
}

/** A request's routing inputs, computed as the gateway's parse and estimate stages do, and the model it names. */
export interface TwinRequestKeys extends RoutingKeys {
  estTokens: number;
  /** The model the request names: a served model, or a LoRA adapter the engines list. */
  model: string;
}

/** A scheduling profile as the gateway's threads build theirs: the config's, over the shared prefix and KV-block indexes. */
export function twinSchedulingProfile(config: Config, t: SharedTables): SchedulingProfile {
  return new SchedulingProfile(config.scheduling, undefined, t.prefixIndex, t.kvIndex);
}

export class TwinGateway {
  readonly tables: SharedTables;
  readonly directory: EndpointDirectory;
  private readonly fastChooser: EndpointChooser;
  private readonly controller: AdmissionController;
  private readonly random: () => number;
  private readonly snapshots: EndpointSnapshot[];
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private readonly hashing: boolean;
  private readonly tokenizing: boolean;
  private readonly band: number;
  private stopped = false;
  /** KV-cache events the index applied. */
  kvEventsApplied = 0;
  /** LoRA adapters as the gateway knows them: numbered by the health worker, listed per endpoint, routed to their base. */
  private readonly adapterNames = new AdapterNames();
  private readonly catalog = new AdapterCatalog();
  /** Some engine serves LoRA adapters: the polls read them. */
  private readonly lora: boolean;
  /** The gateway's circuits, on the virtual clock. */
  readonly breakers: CircuitBreakers;
  /** The gateway's retry budget, on the virtual clock. */
  readonly budget: RetryBudget;
  /** The continuable streams open on each slot, which a drain past its grace moves elsewhere. */
  readonly evictions = new StreamEvictions();
  /** Per slot: its GPU reports a fault to the dcgm-exporter (what the next DCGM poll reads). */
  private readonly gpuFaults: boolean[];
  private dcgmPolling = false;

  constructor(private readonly o: TwinGatewayOptions) {
    const { config, engines, model } = o;
    if (engines.length > config.maxEndpoints) throw new RangeError(`${engines.length} engines exceed max_endpoints (${config.maxEndpoints})`);
    this.random = seededUnit(o.seed ^ 0x5bd1e995);
    const t = (this.tables = sharedTables(config));
    const descriptors: EndpointDescriptor[] = engines.map((e, index) => ({ index, id: e.id, pool: 0, poolName: "default", models: [model] }));
    for (const d of descriptors) t.table.resetRow(d.index);
    this.directory = new EndpointDirectory(descriptors);
    const inputs = profileInputs(config.scheduling);
    this.hashing = inputs.has("prefix-hashes");
    // The gateway follows KV events (and tokenizes prompts) only when the profile reads KV blocks and the engines publish them.
    const kvEvents = o.followKvEvents && inputs.has("kv-blocks");
    this.tokenizing = kvEvents;
    const staleAfterMs = config.health.staleAfterMs;
    // The main thread and the scheduler worker each hold a profile over the same shared indexes, as in the gateway.
    const profile = () => twinSchedulingProfile(config, t);
    this.fastChooser = new EndpointChooser(t.table, this.directory, profile(), staleAfterMs, t.lora);
    const workerChooser = new EndpointChooser(t.table, this.directory, profile(), staleAfterMs, t.lora);
    this.controller = new AdmissionController(t.table, t.pools, t.stats, this.directory, workerChooser, config.admission, staleAfterMs, this.random);
    this.band = config.admission.defaultBand;
    this.lora = engines.some((e) => e.lora !== undefined);
    this.snapshots = engines.map(() => INITIAL_SNAPSHOT);
    this.gpuFaults = engines.map(() => false);
    this.breakers = new CircuitBreakers(t.table, config.circuitBreaker, undefined, (index) => this.probe(index), o.clock.timers());
    this.budget = new RetryBudget(config.retry.budgetRatio, config.retry.minPerS, o.clock.now);
    if (kvEvents) {
      const tracker = new KvBlockTracker(t.kvIndex, t.kvStats);
      engines.forEach((e, slot) => {
        t.kvStats.reset(slot, KV_STREAM.LIVE);
        e.onKvEvents = (events) =>
          o.clock.after(o.kvEventDelayMs, () => {
            tracker.apply(slot, { ts: o.clock.now / 1000, events, dataParallelRank: null });
            this.kvEventsApplied += events.length;
          });
      });
    }
  }

  /** Start polling the engines and ticking the scheduler, as `llmgw serve` does once it is up. */
  start(): void {
    this.poll();
    this.tick();
  }

  /** Stop the periodic work: the run is over. */
  stop(): void {
    this.stopped = true;
    this.breakers.stop();
  }

  /** The config the gateway runs with. */
  get config(): Config {
    return this.o.config;
  }

  /** The circuit field of the model on an endpoint (the twin's endpoints serve one model, first in their list). */
  get modelCircuit(): number {
    return modelCircuitField(0);
  }

  /** The GPU behind slot `row` reports a fault (or stops reporting it); the gateway sees it at its next DCGM poll. */
  setGpuFault(row: number, faulted: boolean): void {
    this.gpuFaults[row] = faulted;
    if (!this.dcgmPolling) {
      this.dcgmPolling = true;
      this.pollDcgm();
    }
  }

  /** The fleet drains slot `row` (or puts its new replica in rotation), as the control plane's registry marks it. */
  setDraining(row: number, draining: boolean): void {
    this.tables.table.setInt(row, I.DRAINING, draining ? 1 : 0);
  }

  /** Requests holding slot `row` now. */
  inflight(row: number): number {
    return this.tables.table.getInt(row, I.INFLIGHT);
  }

  /**
   * An endpoint for a retry or a continuation, by scoring alone (no queue),
   * as the admission client's reschedule: undefined when nothing (else) is
   * ready. `lastResort`: a half-open circuit another request probes may take it too.
   */
  reschedule(keys: TwinRequestKeys, exclude: ReadonlySet<number>, lastResort: boolean): TwinGrant | undefined {
    const route = this.catalog.route(keys.model);
    const c = this.fastChooser.choose(
      {
        model: route?.base ?? keys.model,
        ...(route === undefined ? {} : { adapter: route.id }),
        prefixHashes: keys.prefixHashes,
        ...(keys.tokenBlockKeys ? { tokenBlockKeys: keys.tokenBlockKeys } : {}),
        promptTokens: keys.promptTokens,
        exclude,
        lastResort,
      },
      this.random,
      this.o.clock.now,
    );
    if (!c.ok) return undefined;
    this.tables.pools.take(c.pool, this.band);
    return { index: c.index, pool: c.pool, band: this.band, waitedMs: 0, prefillTokens: c.prefillTokens, circuit: c.circuit, probe: c.probe };
  }

  /** A circuit's active probe: a one-token request to the engine, refused at once by a dead one, timing out on a stalled one. */
  private probe(index: number): Promise<ProbeVerdict> {
    const { clock, engines, config } = this.o;
    const e = engines[index]!;
    const up = !e.down && !e.stalled;
    const ms = e.down ? 0 : up ? PROBE_ANSWER_MS : (config.circuitBreaker.probe?.timeoutMs ?? PROBE_ANSWER_MS);
    return new Promise((resolve) =>
      clock.after(ms, () => {
        resolve(!e.down && !e.stalled ? { ok: true } : { ok: false });
        clock.settle();
      }),
    );
  }

  /** The health worker's DCGM poll: each slot's GPU-fault flag as its exporter reports it now. */
  private pollDcgm(): void {
    if (this.stopped) return;
    this.gpuFaults.forEach((f, row) => this.tables.table.setInt(row, I.GPU_FAULTED, f ? 1 : 0));
    this.o.clock.after(this.o.config.gpuHealth?.pollIntervalMs ?? DEFAULT_GPU_HEALTH_POLL_INTERVAL_MS, () => this.pollDcgm());
  }

  /** The routing inputs of a completion prompt: prefix hashes of its text, token-block keys of its tokens when the profile reads KV blocks. */
  keysOf(prompt: string, maxTokens: number): TwinRequestKeys {
    const body = { model: this.o.model, prompt, max_tokens: maxTokens };
    return {
      ...this.keysOfBody(body, this.o.model),
      // The gateway asks an engine's /tokenize; the sim-engine answers with these ids.
      ...(this.tokenizing ? { tokenBlockKeys: tokenBlockKeys(this.o.engines[0]!.prompt(prompt).ids, MAX_TOKEN_BLOCK_KEYS) } : {}),
    };
  }

  /** The routing inputs of a chat or completion body naming `model`: estimate, prompt tokens and prefix hashes (salted by a LoRA adapter's name, as the gateway does). No token-block keys. */
  keysOfBody(body: Record<string, unknown>, model: string): TwinRequestKeys {
    const affinity = this.o.config.scheduling.prefixAffinity;
    const walk = walkPrompt(body, this.hashing ? affinity.blockChars * affinity.maxBlocks : 0);
    return {
      model,
      estTokens: estimateFromWalk(body, walk),
      promptTokens: promptEstimate(walk),
      prefixHashes: this.hashing ? prefixHashes(walk.text, affinity.blockChars, affinity.maxBlocks, this.catalog.isAdapter(model) ? model : undefined) : [],
    };
  }

  /**
   * Admission and scoring for one request: the fast path, else the
   * scheduler worker's queue. `done` is called once, now or when the queue
   * lets the request go; the returned function takes a queued request out
   * (its client left) and returns false when it was not queued.
   */
  admit(keys: TwinRequestKeys, done: (a: Admitted) => void): () => boolean {
    const now = this.o.clock.now;
    // A LoRA adapter is routed among its base's endpoints, as the admission client does.
    const route = this.catalog.route(keys.model);
    const model = route?.base ?? keys.model;
    const adapter = route === undefined ? {} : { adapter: route.id };
    const pool = this.directory.poolOf(model);
    const notQueued = () => false;
    if (pool === undefined) {
      done({ ok: false, code: "NO_READY_ENDPOINT", message: "no endpoint serves the model" });
      return notQueued;
    }
    const req = {
      model,
      ...adapter,
      prefixHashes: keys.prefixHashes,
      ...(keys.tokenBlockKeys ? { tokenBlockKeys: keys.tokenBlockKeys } : {}),
      promptTokens: keys.promptTokens,
      band: this.band,
    };
    const f = fastAdmit(this.tables.pools, this.fastChooser, this.o.config.admission, pool, req, this.random, now);
    if (f.kind !== "slow") {
      done(
        f.kind === "granted"
          ? { ok: true, index: f.index, pool: f.pool, band: this.band, waitedMs: 0, prefillTokens: f.prefillTokens, circuit: f.circuit, probe: f.probe }
          : { ok: false, code: "NO_READY_ENDPOINT", message: "no ready endpoint" },
      );
      return notQueued;
    }
    const id = this.nextId++;
    const out = this.controller.admit(
      {
        type: "admit",
        id,
        model,
        ...adapter,
        pool,
        band: this.band,
        tenant: "anonymous",
        estTokens: keys.estTokens,
        prefixHashes: keys.prefixHashes,
        ...(keys.tokenBlockKeys ? { tokenBlockKeys: keys.tokenBlockKeys } : {}),
        promptTokens: keys.promptTokens,
      },
      now,
    );
    if (out) {
      done(this.outcome(out));
      return notQueued;
    }
    this.pending.set(id, { resolve: done });
    return () => this.pending.delete(id) && this.controller.cancel(id);
  }

  /** A request let go of its endpoint: the counts go down (its prefill load too, when no token took it off), and what waits may flow. */
  release(grant: { index: number; pool: number; band: number; prefillTokens: number }): void {
    this.tables.table.addInt(grant.index, I.INFLIGHT, -1);
    this.prefillDone(grant);
    this.tables.pools.release(grant.pool, grant.band);
    if (this.tables.pools.queued(grant.pool) > 0) this.pump();
  }

  /** The request's first token: its share of the endpoint's prefill load comes off (once), as the gateway's relay does. */
  prefillDone(grant: { index: number; prefillTokens: number }): void {
    if (grant.prefillTokens === 0) return;
    this.tables.table.addInt(grant.index, I.PREFILL_TOKENS, -grant.prefillTokens);
    grant.prefillTokens = 0;
  }

  private outcome(out: NonNullable<ReturnType<AdmissionController["admit"]>>): Admitted {
    if (out.type === "grant")
      return {
        ok: true,
        index: out.index,
        pool: out.pool,
        band: out.band,
        waitedMs: out.waitedMs,
        prefillTokens: out.prefillTokens,
        circuit: out.circuit,
        probe: out.probe,
      };
    return { ok: false, code: out.error.code, message: out.error.message };
  }

  private pump(): void {
    const now = this.o.clock.now;
    for (const out of this.controller.pump(now)) {
      const p = this.pending.get(out.id);
      if (!p) continue;
      this.pending.delete(out.id);
      p.resolve(this.outcome(out));
    }
  }

  /** The health worker's engine poll: what each engine's /metrics says now, written as the worker writes it; the scheduler follows. */
  private poll(): void {
    if (this.stopped) return;
    const { clock, engines, config, model } = this.o;
    const now = clock.now;
    engines.forEach((e, row) => {
      // A dead engine's port refuses every probe of the poll.
      const outcome = e.down
        ? { healthOk: false, models: undefined, metrics: undefined, errors: ["connection refused"], timedOutOnly: false, startedAt: now, finishedAt: now }
        : {
            healthOk: true,
            healthStatus: 200,
            models: [model],
            ...(this.lora ? { adapters: e.adapters() } : {}),
            metrics: e.metrics(),
            errors: [],
            timedOutOnly: false,
            startedAt: now,
            finishedAt: now,
          };
      const snap = nextSnapshot(this.snapshots[row]!, outcome, [model], config.health.staleAfterMs, false, config.health.timeoutsBeforeUnready);
      this.snapshots[row] = snap;
      writeSnapshot(this.tables.table, row, snap);
      if (this.lora) {
        // What the health worker writes and tells the main thread: the adapters' ids, where each is listed, which run.
        const fresh: [string, number][] = [];
        writeLora(this.tables.lora, this.adapterNames, row, snap, fresh);
        if (fresh.length > 0) this.catalog.setIds(fresh);
        if (snap.adapters) this.catalog.setEndpoint(row, snap.adapters);
      }
    });
    if (this.controller.queued > 0) this.pump();
    else this.controller.refresh(now);
    clock.after(config.health.pollIntervalMs, () => this.poll());
  }

  /** The scheduler worker's own tick: fast while something is queued, slow otherwise. */
  private tick(): void {
    if (this.stopped) return;
    if (this.controller.queued > 0) this.pump();
    else this.controller.refresh(this.o.clock.now);
    this.o.clock.after(this.controller.queued > 0 ? QUEUE_TICK_MS : IDLE_TICK_MS, () => this.tick());
  }
}
