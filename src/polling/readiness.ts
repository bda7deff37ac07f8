/**
 * Pure core of the endpoint poller: from the three probe outcomes of one poll
 * and the previous state, the next snapshot. Readiness is two questions —
 * /health (process up) and /v1/models (weights loaded) — because routing on
 * /health alone sends traffic into a model that is still loading.
 */
import type { EngineMetrics } from "../engines/engine-metrics.ts";
import type { ListedAdapter } from "../protocol/health-messages.ts";
import { modelNameProblem } from "../shared/model-name.ts";

export type { ListedAdapter } from "../protocol/health-messages.ts";

export interface EndpointSnapshot {
  /** /health answered 2xx: the process is up. */
  healthy: boolean;
  /** Model ids from /v1/models when it answered 2xx with a model list (LoRA adapters left out); undefined otherwise. */
  loadedModels: string[] | undefined;
  /** LoRA adapters /v1/models lists (entries with a `parent`); undefined when it did not answer with a list. */
  adapters: ListedAdapter[] | undefined;
  /** healthy, /v1/models answered, and every configured model is loaded (any model when none configured). */
  ready: boolean;
  /** The last good /metrics view; kept (not zeroed) when a later scrape fails. Undefined until one succeeds. */
  metrics: EngineMetrics | undefined;
  /** Date.now() of the last good /metrics; undefined until one succeeds. */
  metricsAt: number | undefined;
  /** metricsAt is missing or older than staleAfterMs at the time of this snapshot. */
  metricsStale: boolean;
  /** Polls in a row in which /health did not answer 2xx; 0 after a healthy poll. */
  consecutiveFailures: number;
  /** Polls in a row that failed only by timing out while the endpoint was kept ready (see nextSnapshot); 0 otherwise. */
  slowPolls: number;
  /** The first failure of the latest poll ("GET /health: HTTP 503", "... timed out ..."); undefined when all three probes succeeded. */
  lastError: string | undefined;
  /** How long the latest poll took, in ms. */
  pollMs: number;
}

/** What one poll found; `metrics` undefined when /metrics failed. */
export interface PollOutcome {
  healthOk: boolean;
  /** The HTTP status /health answered with (undefined: no answer: refused, timed out). */
  healthStatus?: number | undefined;
  /** Parsed ids, or undefined when /v1/models failed or did not return a model list. */
  models: string[] | undefined;
  /** The adapters of that list (absent: none). */
  adapters?: ListedAdapter[] | undefined;
  metrics: EngineMetrics | undefined;
  errors: string[];
  /** Every probe that decides readiness (/health, /v1/models) and failed, failed by timing out: the engine said nothing against it. */
  timedOutOnly?: boolean;
  startedAt: number;
  finishedAt: number;
}

export const INITIAL_SNAPSHOT: Readonly<EndpointSnapshot> = Object.freeze({
  healthy: false,
  loadedModels: undefined,
  adapters: undefined,
  ready: false,
  metrics: undefined,
  metricsAt: undefined,
  metricsStale: true,
  consecutiveFailures: 0,
  slowPolls: 0,
  lastError: undefined,
  pollMs: 0,
});

/**
 * An OpenAI `GET /v1/models` body (`{"data":[{"id":…},…]}`): the model ids,
 * and apart from them the LoRA adapters (vLLM lists an adapter with
 * `parent` set to its base, vllm/entrypoints/openai/serving_models.py);
 * undefined when it is not a model list. An entry whose name the gateway
 * would refuse in its own config (src/shared/model-name.ts) is left out and
 * counted in `refused`: the engine's other models are still served.
 */
export function parseModelList(body: string): { ids: string[]; adapters: ListedAdapter[]; refused: number } | undefined {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (typeof json !== "object" || json === null || !("data" in json) || !Array.isArray(json.data)) return undefined;
  const ids: string[] = [];
  const adapters: ListedAdapter[] = [];
  let refused = 0;
  for (const item of json.data as unknown[]) {
    if (typeof item !== "object" || item === null || !("id" in item) || typeof item.id !== "string") continue;
    const parent = "parent" in item ? item.parent : null;
    const isAdapter = typeof parent === "string" && parent !== "" && parent !== item.id;
    if (modelNameProblem(item.id) !== undefined || (isAdapter && modelNameProblem(parent) !== undefined)) refused++;
    else if (isAdapter) adapters.push({ name: item.id, parent });
    else ids.push(item.id);
  }
  return { ids, adapters, refused };
}

/** The model ids of a `GET /v1/models` body (adapters left out); undefined when it is not a model list. */
export function parseModelIds(body: string): string[] | undefined {
  return parseModelList(body)?.ids;
}

/** Ready when healthy and loaded ⊇ configured; with nothing configured, at least one model must be loaded. */
export function isReady(healthy: boolean, loaded: readonly string[] | undefined, configured: readonly string[] | undefined): boolean {
  if (!healthy || loaded === undefined) return false;
  if (configured === undefined || configured.length === 0) return loaded.length > 0;
  const have = new Set(loaded);
  return configured.every((m) => have.has(m));
}

export function isStale(metricsAt: number | undefined, now: number, staleAfterMs: number): boolean {
  return metricsAt === undefined || now - metricsAt > staleAfterMs;
}

/**
 * Readiness of an endpoint whose configured models are authoritative
 * (models_source: static — hosted providers, routers and aliases list other
 * names): /health answering 2xx, or, for an upstream that has no /health
 * (404, 405), any HTTP answer at all; its model list is not asked.
 */
function isReadyStatic(healthOk: boolean, healthStatus: number | undefined): boolean {
  return healthOk || healthStatus === 404 || healthStatus === 405;
}

/**
 * The snapshot after one poll; `staticModels`: the configured models are
 * authoritative (see isReadyStatic). A ready endpoint whose poll only timed
 * out stays ready, with what it last answered, until `timeoutsBeforeUnready`
 * such polls in a row: an engine whose API server is slow for a moment under
 * load (or a gateway host that could not run the poll in time) is not
 * ejected by one late answer, where requests themselves still have their
 * deadlines, retries and circuit breakers. Any answer that says "not ready"
 * (a non-2xx status, a refused connection, a model list without the model)
 * takes it out at once.
 */
export function nextSnapshot(
  prev: Readonly<EndpointSnapshot>,
  outcome: PollOutcome,
  configured: readonly string[] | undefined,
  staleAfterMs: number,
  staticModels = false,
  timeoutsBeforeUnready = 1,
): EndpointSnapshot {
  const metrics = outcome.metrics ?? prev.metrics;
  // metricsAt is when the scrape succeeded, i.e. when its answer came back.
  const metricsAt = outcome.metrics !== undefined ? outcome.finishedAt : prev.metricsAt;
  const next = answered(prev, outcome, configured, staleAfterMs, staticModels, metrics, metricsAt);
  if (!next.ready && prev.ready && outcome.timedOutOnly === true && prev.slowPolls + 1 < timeoutsBeforeUnready) {
    return { ...next, healthy: prev.healthy, loadedModels: prev.loadedModels, adapters: prev.adapters, ready: true, slowPolls: prev.slowPolls + 1 };
  }
  return next;
}

/** The snapshot as this poll's answers alone say it. */
function answered(
  prev: Readonly<EndpointSnapshot>,
  outcome: PollOutcome,
  configured: readonly string[] | undefined,
  staleAfterMs: number,
  staticModels: boolean,
  metrics: EngineMetrics | undefined,
  metricsAt: number | undefined,
): EndpointSnapshot {
  return {
    healthy: outcome.healthOk,
    loadedModels: outcome.models,
    adapters: outcome.models === undefined ? undefined : (outcome.adapters ?? []),
    ready: staticModels ? isReadyStatic(outcome.healthOk, outcome.healthStatus) : isReady(outcome.healthOk, outcome.models, configured),
    metrics,
    metricsAt,
    metricsStale: isStale(metricsAt, outcome.finishedAt, staleAfterMs),
    consecutiveFailures: outcome.healthOk ? 0 : prev.consecutiveFailures + 1,
    slowPolls: 0,
    lastError: outcome.errors[0],
    pollMs: outcome.finishedAt - outcome.startedAt,
  };
}
