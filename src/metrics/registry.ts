/**
 * The gateway's prom-client registry: metrics observed on the main thread
 * plus per-endpoint gauges read from the SharedArrayBuffer at scrape time.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { SCORER_NAMES } from "../config/plugin-names.ts";
import { type AdmissionStatsTable, type EndpointTable, F, I } from "../shared/endpoint-table.ts";
import type { LoraTable } from "../shared/lora-table.ts";
import { boundCounter, boundHistogram, type Observer } from "./bound-series.ts";
import { registerBuildInfo } from "./build-info.ts";
import { ADMIN_REFUSALS, M, type Outcome } from "./names.ts";

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const OVERHEAD_BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1];
/** A continuation's first token costs a prefill of the prompt and the delivered text: milliseconds to seconds. */
const RECOVERY_BUCKETS = [0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30];
const ITL_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 5];
const WAIT_BUCKETS = [0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
const SCORE_BUCKETS = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1];

/**
 * prom-client's default metrics include three gauges named like counters
 * (`promtool check metrics`: non-counter metrics should not have "_total"
 * suffix). Each is only the sum of the same-named gauge without the suffix,
 * which is labelled by type (`sum(nodejs_active_handles)`), so they go.
 */
const MISNAMED_DEFAULT_METRICS = ["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"];

/**
 * The label-bound series one request of a (model, route) touches, so a
 * request hashes no label sets: TTFT and inter-token gaps per chunk, and at
 * its end the outcome, duration and tokens.
 */
export interface RequestSeries {
  ttft: Observer;
  interToken: Observer;
  finished(outcome: Outcome, stream: boolean, seconds: number, usage: { prompt_tokens: number; completion_tokens: number } | undefined): void;
}

export class GatewayMetrics {
  readonly registry = new Registry();
  readonly requests;
  readonly duration;
  readonly ttft;
  readonly interToken;
  readonly tokens;
  readonly retries;
  readonly fallbacks;
  readonly sameEndpointRetries;
  readonly attemptFailures;
  readonly scorerScore;
  readonly filterDrops;
  readonly circuitTransitions;
  readonly modelCircuitTransitions;
  readonly circuitProbes;
  readonly overhead;
  /** The router's own overhead per request, bound (observed once a request). */
  readonly overheadSeries: Observer;
  readonly malformedEvents;
  readonly toolCalls;
  readonly deadlinesExcused;
  readonly loopStalls;
  readonly streamRecoveries;
  readonly streamRecoverySeconds;
  private readonly requestSeriesCache = new Map<string, RequestSeries>();

  readonly admissionWait;
  readonly admissionRejections;
  readonly responsesNotStored;
  readonly adminRefusals;
  readonly admissionGrants;
  readonly admissionPath;

  constructor(
    table: EndpointTable,
    /** The live endpoints (slot and id) at scrape time; endpoints come and go. */
    endpoints: () => Iterable<{ index: number; id: string }>,
    opts: {
      defaultMetrics?: boolean;
      stats?: AdmissionStatsTable;
      bandNames?: readonly string[];
      /** The pools (row and name) at scrape time. */
      pools?: () => Iterable<{ index: number; name: string }>;
      /** Messages posted to the scheduler worker so far, by kind. */
      schedulerMessages?: () => Readonly<Record<string, number>>;
      /** LoRA adapters per endpoint (the shared table the health worker writes). */
      lora?: LoraTable;
      /** Engine metrics older than this are absent (health.stale_after_ms). */
      staleAfterMs?: number;
    } = {},
  ) {
    const r = [this.registry];
    if (opts.defaultMetrics ?? true) {
      collectDefaultMetrics({ register: this.registry });
      for (const name of MISNAMED_DEFAULT_METRICS) this.registry.removeSingleMetric(name);
    }
    const counter = <L extends string>(d: { name: string; help: string; labels: readonly L[] }) =>
      new Counter<L>({ name: d.name, help: d.help, labelNames: d.labels, registers: r });
    const histogram = <L extends string>(d: { name: string; help: string; labels: readonly L[] }, buckets: number[]) =>
      new Histogram<L>({ name: d.name, help: d.help, labelNames: d.labels, buckets, registers: r });

    this.requests = counter(M.requests);
    this.duration = histogram(M.duration, LATENCY_BUCKETS);
    this.ttft = histogram(M.ttft, LATENCY_BUCKETS);
    this.interToken = histogram(M.interToken, ITL_BUCKETS);
    this.tokens = counter(M.tokens);
    this.retries = counter(M.retries);
    this.fallbacks = counter(M.fallbacks);
    this.sameEndpointRetries = counter(M.sameEndpointRetries);
    this.attemptFailures = counter(M.attemptFailures);
    this.scorerScore = histogram(M.scorerScore, SCORE_BUCKETS);
    this.filterDrops = counter(M.filterDrops);
    this.circuitTransitions = counter(M.circuitTransitions);
    this.modelCircuitTransitions = counter(M.modelCircuitTransitions);
    this.circuitProbes = counter(M.circuitProbes);
    this.overhead = histogram(M.overhead, OVERHEAD_BUCKETS);
    this.overheadSeries = boundHistogram(this.overhead);
    this.malformedEvents = counter(M.malformedEvents);
    this.toolCalls = counter(M.toolCalls);
    this.deadlinesExcused = counter(M.deadlinesExcused);
    this.loopStalls = histogram(M.loopStalls, [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]);
    this.streamRecoveries = counter(M.streamRecoveries);
    this.streamRecoverySeconds = histogram(M.streamRecoverySeconds, RECOVERY_BUCKETS);
    this.admissionWait = histogram(M.admissionWait, WAIT_BUCKETS);
    this.admissionRejections = counter(M.admissionRejections);
    this.responsesNotStored = counter(M.responsesNotStored);
    this.adminRefusals = counter(M.adminRefusals);
    this.admissionGrants = counter(M.admissionGrants);
    this.admissionPath = counter(M.admissionPath);

    for (const scorer of SCORER_NAMES) this.scorerScore.labels({ scorer });
    for (const reason of ADMIN_REFUSALS) this.adminRefusals.labels({ reason });
    // Endpoint gauges are read from the shared table when scraped, so they
    // cost nothing on the request path.
    const fromTable = (d: { name: string; help: string }, read: (row: number) => number | undefined) =>
      new Gauge<"endpoint">({
        name: d.name,
        help: d.help,
        labelNames: ["endpoint"],
        registers: r,
        collect() {
          this.reset();
          for (const { index, id } of endpoints()) {
            const v = read(index);
            if (v !== undefined) this.set({ endpoint: id }, v);
          }
        },
      });
    fromTable(M.endpointCapacity, (row) => {
      const c = table.getInt(row, I.CAPACITY);
      return c > 0 ? c : undefined;
    });
    const stats = opts.stats;
    if (stats) {
      const bandNames = opts.bandNames ?? [];
      const pools = opts.pools ?? (() => []);
      new Gauge<"band">({
        ...M.admissionQueueDepth,
        labelNames: M.admissionQueueDepth.labels,
        registers: r,
        collect() {
          bandNames.forEach((band, i) => this.set({ band }, stats.depth(i)));
        },
      });
      new Gauge<"pool">({
        ...M.poolSaturation,
        labelNames: M.poolSaturation.labels,
        registers: r,
        collect() {
          this.reset();
          for (const { index, name } of pools()) {
            const v = stats.saturation(index);
            if (Number.isFinite(v)) this.set({ pool: name }, v);
          }
        },
      });
    }
    fromTable(M.endpointInflight, (row) => table.getInt(row, I.INFLIGHT));
    fromTable(M.endpointPrefillTokens, (row) => table.getInt(row, I.PREFILL_TOKENS));
    const messages = opts.schedulerMessages;
    if (messages) {
      new Counter<"kind">({
        ...M.schedulerMessages,
        labelNames: M.schedulerMessages.labels,
        registers: r,
        collect() {
          this.reset();
          for (const [kind, n] of Object.entries(messages())) this.inc({ kind }, n);
        },
      });
    }
    fromTable(M.endpointReady, (row) => table.getInt(row, I.READY));
    // Engine figures older than stale_after_ms are absent to the scorers, and so to the scrape.
    const fresh = (row: number) => {
      const at = table.getFloat(row, F.METRICS_AT);
      return !Number.isNaN(at) && Date.now() - at <= (opts.staleAfterMs ?? Infinity);
    };
    const lora = opts.lora;
    if (lora) {
      new Gauge<"endpoint" | "state">({
        ...M.endpointLoraAdapters,
        labelNames: M.endpointLoraAdapters.labels,
        registers: r,
        collect() {
          this.reset();
          for (const { index, id } of endpoints()) {
            this.set({ endpoint: id, state: "registered" }, lora.count(index, "registered"));
            if (lora.maxLoras(index) === undefined || !fresh(index)) continue;
            this.set({ endpoint: id, state: "running" }, lora.count(index, "running"));
            this.set({ endpoint: id, state: "waiting" }, lora.count(index, "waiting"));
          }
        },
      });
      fromTable(M.endpointLoraSlots, (row) => (fresh(row) ? lora.maxLoras(row) : undefined));
    }
    fromTable(M.endpointCircuit, (row) => table.getInt(row, I.CIRCUIT));
    fromTable(M.endpointMetricsAge, (row) => {
      const at = table.getFloat(row, F.METRICS_AT);
      return Number.isNaN(at) ? undefined : Math.max(0, (Date.now() - at) / 1000);
    });
    // What the scorers read, with their rule for stale metrics (src/admission/endpoint-views.ts).
    fromTable(M.endpointKvCacheUsage, (row) => {
      const kv = table.getFloat(row, F.KV_USAGE);
      return fresh(row) && !Number.isNaN(kv) ? kv : undefined;
    });
    fromTable(M.endpointRequestsWaiting, (row) => (fresh(row) ? table.optionalInt(row, I.WAITING) : undefined));
    fromTable(M.endpointRequestsRunning, (row) => (fresh(row) ? table.optionalInt(row, I.RUNNING) : undefined));
    registerBuildInfo(this.registry);
  }

  private readonly scoreChildren = new Map<string, Observer>();
  private readonly grantChildren = new Map<string, { wait: Observer; grant: { inc(): void }; path: Record<"fast" | "queued", { inc(): void }> }>();

  /** The score histogram of one scorer (bound once: no label hashing per request). */
  scoreSeries(scorer: string): Observer {
    let c = this.scoreChildren.get(scorer);
    if (!c) this.scoreChildren.set(scorer, (c = boundHistogram(this.scorerScore, { scorer })));
    return c;
  }

  /** What a granted request of (band, tenant label) records, bound once. */
  grantSeries(band: string, tenant: string): { wait: Observer; grant: { inc(): void }; path: Record<"fast" | "queued", { inc(): void }> } {
    const key = `${band}\u0000${tenant}`;
    let c = this.grantChildren.get(key);
    if (!c) {
      c = {
        wait: boundHistogram(this.admissionWait, { band }),
        grant: boundCounter(this.admissionGrants, { band, tenant }),
        path: { fast: boundCounter(this.admissionPath, { path: "fast" }), queued: boundCounter(this.admissionPath, { path: "queued" }) },
      };
      this.grantChildren.set(key, c);
    }
    return c;
  }

  /** The series of one (configured or discovered) model and route, made once and kept. */
  requestSeries(model: string, route: string): RequestSeries {
    const key = `${route}\u0000${model}`;
    let m = this.requestSeriesCache.get(key);
    if (!m) {
      const outcomes = new Map<Outcome, { inc(): void }>();
      const duration = {
        true: boundHistogram(this.duration, { model, route, stream: "true" }),
        false: boundHistogram(this.duration, { model, route, stream: "false" }),
      };
      const prompt = boundCounter(this.tokens, { model, kind: "prompt" });
      const completion = boundCounter(this.tokens, { model, kind: "completion" });
      m = {
        ttft: boundHistogram(this.ttft, { model }),
        interToken: boundHistogram(this.interToken, { model }),
        finished: (outcome, stream, seconds, usage) => {
          let c = outcomes.get(outcome);
          if (!c) outcomes.set(outcome, (c = boundCounter(this.requests, { model, route, outcome })));
          c.inc();
          duration[stream ? "true" : "false"].observe(seconds);
          if (usage) {
            prompt.inc(usage.prompt_tokens);
            completion.inc(usage.completion_tokens);
          }
        },
      };
      this.requestSeriesCache.set(key, m);
    }
    return m;
  }
}
