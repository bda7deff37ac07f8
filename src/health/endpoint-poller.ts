/**
 * Polls each engine endpoint's /metrics, /health and /v1/models (concurrently,
 * each under its own deadline) and reports an EndpointSnapshot per poll. The
 * I/O shell around readiness.ts; workers/health.ts writes the snapshots into
 * the endpoint table.
 */
import { mapEngineSamples, type EngineHint, type EngineMetrics } from "../engines/engine-metrics.ts";
import { parsePrometheusText } from "../engines/prom-text.ts";
import { PollLoop } from "./poll-loop.ts";
import { originPath, probe, type FetchFn } from "./probe.ts";
import { INITIAL_SNAPSHOT, nextSnapshot, parseModelIds, type EndpointSnapshot } from "./readiness.ts";

export interface EngineEndpoint {
  /** Slot in the endpoint table; passed back to onSnapshot. */
  index: number;
  id: string;
  /** Base URL; /metrics, /health and /v1/models are taken at its origin. */
  url: string;
  engine: EngineHint;
  /** Models that must be listed by /v1/models before the endpoint is ready. */
  models?: readonly string[];
}

export interface PollerOptions {
  intervalMs: number;
  /** Deadline of each GET (dial + headers + body). */
  timeoutMs: number;
  /** Metrics older than this are flagged `metricsStale` (still reported). */
  staleAfterMs: number;
  fetch?: FetchFn;
}

export type OnEndpointSnapshot = (index: number, snapshot: EndpointSnapshot) => void;

export class EndpointPoller {
  readonly #endpoints: readonly EngineEndpoint[];
  readonly #options: PollerOptions;
  readonly #fetch: FetchFn;
  readonly #onSnapshot: OnEndpointSnapshot;
  readonly #snapshots: EndpointSnapshot[];
  readonly #loop: PollLoop;

  constructor(endpoints: readonly EngineEndpoint[], options: PollerOptions, onSnapshot: OnEndpointSnapshot) {
    if (!(options.timeoutMs > 0)) throw new RangeError(`timeoutMs must be > 0, got ${options.timeoutMs}`);
    this.#endpoints = endpoints.map((e) => ({ ...e }));
    this.#options = { ...options };
    this.#fetch = options.fetch ?? ((url, init) => fetch(url, init));
    this.#onSnapshot = onSnapshot;
    this.#snapshots = endpoints.map(() => ({ ...INITIAL_SNAPSHOT }));
    this.#loop = new PollLoop(endpoints.length, options.intervalMs, (position, signal) => this.#poll(position, signal));
  }

  /** Poll now and then every intervalMs. */
  start(): void {
    this.#loop.start();
  }

  /** Stop the timer and abort in-flight requests; resolves once they have settled. */
  stop(): Promise<void> {
    return this.#loop.stop();
  }

  /** Poll every endpoint once; resolves after every onSnapshot of this round. */
  pollOnce(): Promise<void> {
    return this.#loop.pollOnce();
  }

  /** The latest snapshot of the endpoint with table slot `index`. */
  snapshot(index: number): EndpointSnapshot | undefined {
    const position = this.#endpoints.findIndex((e) => e.index === index);
    return position < 0 ? undefined : this.#snapshots[position];
  }

  /** Ticks skipped because an endpoint's previous poll was still running. */
  get skippedTicks(): number {
    return this.#loop.skippedTicks;
  }

  async #poll(position: number, signal: AbortSignal): Promise<void> {
    const ep = this.#endpoints[position]!;
    const { timeoutMs } = this.#options;
    const startedAt = Date.now();
    const [metricsRes, healthRes, modelsRes] = await Promise.all([
      probe(this.#fetch, originPath(ep.url, "/metrics"), timeoutMs, signal, "GET /metrics"),
      probe(this.#fetch, originPath(ep.url, "/health"), timeoutMs, signal, "GET /health"),
      probe(this.#fetch, originPath(ep.url, "/v1/models"), timeoutMs, signal, "GET /v1/models"),
    ]);
    // A poll cut short by stop() says nothing about the endpoint: keep the old snapshot.
    if (signal.aborted) return;
    const errors: string[] = [];
    for (const r of [healthRes, modelsRes, metricsRes]) if (!r.ok) errors.push(r.error);

    let metrics: EngineMetrics | undefined;
    if (metricsRes.ok) {
      const parsed = parsePrometheusText(metricsRes.body);
      metrics = mapEngineSamples(parsed.samples, ep.engine, parsed.malformed);
    }
    let models: string[] | undefined;
    if (modelsRes.ok) {
      models = parseModelIds(modelsRes.body);
      if (models === undefined) errors.push("GET /v1/models: not an OpenAI model list");
    }
    const snap = nextSnapshot(
      this.#snapshots[position]!,
      { healthOk: healthRes.ok, models, metrics, errors, startedAt, finishedAt: Date.now() },
      ep.models,
      this.#options.staleAfterMs,
    );
    this.#snapshots[position] = snap;
    this.#onSnapshot(ep.index, snap);
  }
}

export type { EndpointSnapshot } from "./readiness.ts";
