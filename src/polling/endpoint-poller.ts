/**
 * Polls each engine endpoint's /metrics, /health and /v1/models (concurrently,
 * each under its own deadline) and reports an EndpointSnapshot per poll. The
 * I/O shell around readiness.ts; workers/health.ts writes the snapshots into
 * the endpoint table.
 */
import { type EngineHint, type EngineMetrics, mapEngineSamples } from "../engines/engine-metrics.ts";
import { parsePrometheusText } from "../engines/prom-text.ts";
import { logger } from "../shared/logger.ts";
import { type FetchFn, originPath, probe } from "./probe.ts";
import { type EndpointSnapshot, INITIAL_SNAPSHOT, type ListedAdapter, nextSnapshot, parseModelList } from "./readiness.ts";
import { TargetPoller } from "./target-poller.ts";

export interface EngineEndpoint {
  /** Slot in the endpoint table; passed back to onSnapshot. */
  index: number;
  id: string;
  /** Base URL; /metrics, /health and /v1/models are taken at its origin. */
  url: string;
  engine: EngineHint;
  /** Models that must be listed by /v1/models before the endpoint is ready. */
  models?: readonly string[];
  /** The configured models are authoritative: ready on /health alone (readiness.ts isReadyStatic). */
  staticModels?: boolean;
  /**
   * Sent with every poll: the engine's API key and configured headers. vLLM's
   * --api-key leaves /health and /metrics open (PUBLIC_ENDPOINTS in its
   * AuthenticationMiddleware) but guards /v1/models; a proxy in front of an
   * engine may guard all three, so all three carry them.
   */
  headers?: Readonly<Record<string, string>>;
}

export interface PollerOptions {
  intervalMs: number;
  /** Deadline of each GET (dial + headers + body). */
  timeoutMs: number;
  /** Metrics older than this are flagged `metricsStale` (still reported). */
  staleAfterMs: number;
  /** Polls in a row that only timed out before a ready endpoint is no longer ready (readiness.ts's nextSnapshot); 1 when unset. */
  timeoutsBeforeUnready?: number;
  fetch?: FetchFn;
}

/** What a 401 or 403 from an engine means to the operator reading the poll's errors. */
const UNAUTHORIZED_HINT = ": the engine wants an API key (set the endpoint's api_key_env or api_key_file), or refused the one configured";

type OnEndpointSnapshot = (index: number, snapshot: EndpointSnapshot) => void;

export class EndpointPoller extends TargetPoller<EngineEndpoint, EndpointSnapshot> {
  private readonly options: PollerOptions;
  /** Endpoint id → names its /v1/models listed that the gateway refused, at the last poll that listed models. */
  private readonly refusedNames = new Map<string, number>();

  constructor(endpoints: readonly EngineEndpoint[], options: PollerOptions, onSnapshot: OnEndpointSnapshot) {
    super(
      endpoints.map((e) => ({ ...e })),
      options,
      INITIAL_SNAPSHOT,
      onSnapshot,
    );
    this.options = { ...options };
  }

  protected async pollTarget(ep: EngineEndpoint, previous: Readonly<EndpointSnapshot>, signal: AbortSignal): Promise<EndpointSnapshot | undefined> {
    const { timeoutMs } = this.options;
    const startedAt = Date.now();
    const [metricsRes, healthRes, modelsRes] = await Promise.all([
      probe(this.fetchFn, originPath(ep.url, "/metrics"), timeoutMs, signal, "GET /metrics", ep.headers),
      probe(this.fetchFn, originPath(ep.url, "/health"), timeoutMs, signal, "GET /health", ep.headers),
      probe(this.fetchFn, originPath(ep.url, "/v1/models"), timeoutMs, signal, "GET /v1/models", ep.headers),
    ]);
    if (signal.aborted) return undefined;
    const errors: string[] = [];
    for (const r of [healthRes, modelsRes, metricsRes]) if (!r.ok) errors.push(r.status === 401 || r.status === 403 ? r.error + UNAUTHORIZED_HINT : r.error);

    let metrics: EngineMetrics | undefined;
    if (metricsRes.ok) {
      const parsed = parsePrometheusText(metricsRes.body);
      metrics = mapEngineSamples(parsed.samples, ep.engine, parsed.malformed);
    }
    let models: string[] | undefined;
    let adapters: ListedAdapter[] | undefined;
    if (modelsRes.ok) {
      const list = parseModelList(modelsRes.body);
      if (list === undefined) errors.push("GET /v1/models: not an OpenAI model list");
      else if (list.refused > 0) errors.push(`GET /v1/models: ${list.refused} model name(s) left out (control, format or whitespace characters, or too long)`);
      // Said once per change, not every poll: the engine keeps listing them.
      const refused = list?.refused ?? 0;
      if (refused !== (this.refusedNames.get(ep.id) ?? 0)) {
        this.refusedNames.set(ep.id, refused);
        if (refused > 0)
          logger().warn(
            { endpoint: ep.id, refused },
            "engine lists model names the gateway does not accept (control, format or whitespace characters, or too long): those models are not routed to",
          );
      }
      models = list?.ids;
      adapters = list?.adapters;
    }
    // Readiness rests on /health and /v1/models; a failure of either that is only a timeout says nothing against it.
    const deciding = ep.staticModels === true ? [healthRes] : [healthRes, modelsRes];
    const timedOutOnly = deciding.some((r) => !r.ok) && deciding.every((r) => r.ok || r.timedOut);
    return nextSnapshot(
      previous,
      { healthOk: healthRes.ok, healthStatus: healthRes.status, models, adapters, metrics, errors, timedOutOnly, startedAt, finishedAt: Date.now() },
      ep.models,
      this.options.staleAfterMs,
      ep.staticModels === true,
      this.options.timeoutsBeforeUnready,
    );
  }
}

export type { EndpointSnapshot } from "./readiness.ts";
