/**
 * The scheduling contracts: filters drop endpoints, scorers rate the rest in
 * [0,1] (1 is best), a picker chooses one. All pure: plain data in, plain
 * data out; the scheduler worker wires them to the endpoint table. Filters
 * and scorers declare the inputs they read (SchedulingInput).
 */

/** What scheduling knows of one endpoint at decision time. */
export interface EndpointView {
  /** Row in the endpoint table (stable for the gateway's lifetime). */
  readonly index: number;
  readonly id: string;
  readonly pool: string;
  /** Model names this endpoint serves (configured or discovered). */
  readonly models: readonly string[];
  /** /health answered and /v1/models lists the model (weights loaded). */
  readonly ready: boolean;
  readonly draining: boolean;
  /** The gateway's circuit breaker has taken this endpoint out of rotation. */
  readonly circuitOpen: boolean;
  /** A GPU behind this endpoint reports a fault (XID, ECC) in DCGM metrics. */
  readonly gpuFaulted: boolean;
  /** Engine-reported waiting requests; undefined when absent or stale (never 0 for "unknown"). */
  readonly waiting: number | undefined;
  /** Engine-reported running requests; undefined when absent or stale. */
  readonly running: number | undefined;
  /** Engine-reported KV-cache usage in [0,1]; undefined when absent or stale. */
  readonly kvUsage: number | undefined;
  /** The router's own in-flight count for this endpoint (dispatched + leased), never stale. */
  readonly inflight: number;
  /** The router's own count of uncached prompt tokens sent to this endpoint and not yet past their first token (0 unless the profile reads `prefill-load`). */
  readonly prefillTokens: number;
  /** The batch capacity learned for this endpoint (the most requests it runs at once); absent when unknown. */
  readonly capacity?: number;
  /** For a request naming a LoRA adapter: what this endpoint holds of it (absent for other requests). */
  readonly adapter?: AdapterView;
}

/** One endpoint's state for the request's LoRA adapter (vLLM: /v1/models and vllm:lora_requests_info). */
export interface AdapterView {
  /** /v1/models lists it: the engine serves it (vLLM answers 404 for an adapter it does not list). */
  readonly registered: boolean;
  /** Requests with it are in the running batch: it holds a GPU slot. False when the engine's metrics are absent or stale. */
  readonly running: boolean;
  /** Requests with it wait in the engine's queue (its slots are taken by others). */
  readonly waiting: boolean;
  /** Among the last max_loras adapters the gateway sent there or saw running there: likely still in a GPU slot (vLLM's metric does not show idle adapters). False when the metrics are absent or stale. */
  readonly resident: boolean;
  /** Distinct adapters running or waiting there; undefined when not reported or stale. */
  readonly active: number | undefined;
  /** Distinct adapters running there (holding slots); undefined when not reported or stale. */
  readonly runningAdapters: number | undefined;
  /** The engine's max_loras (adapters one step holds); undefined when not reported or stale. */
  readonly maxLoras: number | undefined;
}

/** What scheduling knows of the request. */
export interface RequestView {
  /** The canonical model name (aliases resolved). */
  readonly model: string;
  /** Chained hashes of the prompt's leading blocks (see prefix-hash.ts); may be empty. */
  readonly prefixHashes: readonly number[];
  /** Endpoints already tried for this request (retries exclude them). */
  readonly exclude?: ReadonlySet<number>;
  /**
   * Token-block keys of the prompt's leading tokens (see token-blocks.ts),
   * from the engine's own /tokenize; absent when the prompt was not
   * tokenized (too short, no endpoint publishes KV events, or the time
   * limit passed).
   */
  readonly tokenBlockKeys?: readonly number[];
  /** The LoRA adapter the request names (an id of the adapter-name table, src/shared/lora-table.ts); `model` is then its base. */
  readonly adapter?: number;
  /** The prompt's estimated tokens (0 when unknown). */
  readonly promptTokens?: number;
}

/** Shared, mutable state plugins may read while scoring (owned by the profile). */
export interface SchedulingContext {
  readonly prefixIndex: PrefixIndexReader;
  /** What the engines' KV-cache events say they hold. */
  readonly kvIndex: KvBlockIndexReader;
  /** What stands in for precise-prefix where an endpoint's event stream is not live. */
  readonly preciseStandIn: "prefix-affinity" | "prefix-rendezvous";
  /** The `cache-affinity` filter's settings. */
  readonly cacheAffinity: CacheAffinitySettings;
}

/** When an endpoint counts as warm for a request, and how far ahead in prefill work a warm one may get before colder ones are let back in. */
interface CacheAffinitySettings {
  /** Warm: the endpoint holds at least this fraction of the prompt, in (0,1]. */
  readonly threshold: number;
  /** A cold endpoint rejoins the candidates when its uncached prompt tokens in flight are at least this many below the least loaded warm one's. */
  readonly maxLeadTokens: number;
}

export interface KvBlockIndexReader {
  /** Whether endpoint `index`'s event stream is live: its index is what its engine holds. */
  live(index: number): boolean;
  /** How many leading keys of `keys` endpoint `index` holds, stopping at the first it does not (0..keys.length). */
  matchedBlocks(keys: readonly number[], index: number): number;
}

export interface PrefixIndexReader {
  /** How many leading hashes of `hashes` were last routed to endpoint `index` (0..hashes.length). */
  matchedBlocks(hashes: readonly number[], index: number): number;
}

/**
 * What a filter or scorer reads besides the request's model and each
 * endpoint's identity (index, id, pool). Startup derives from the configured
 * profile's declarations which inputs to produce: the ones marked "on
 * demand" cost work per request or a thread, and are wired only when a
 * filter or a scorer with a weight above 0 consumes them; the others come
 * with every gateway.
 *
 * - `models`: `EndpointView.models` (configured, or the engine's /v1/models).
 * - `readiness`: `EndpointView.ready` (the health worker's /health and /v1/models polls).
 * - `draining`: `EndpointView.draining` (drains and cordons).
 * - `circuits`: `EndpointView.circuitOpen` (the gateway's circuit breakers).
 * - `gpu-faults`: `EndpointView.gpuFaulted` (DCGM exporters).
 * - `engine-load`: `waiting`, `running`, `kvUsage` (the engines' /metrics).
 * - `inflight`: `inflight` and the learned `capacity` (the router's own counts).
 * - `lora`: `req.adapter` and `EndpointView.adapter` (the LoRA table).
 * - `tried`: `req.exclude` (the attempt loop's endpoints already tried).
 * - `prefill-load` (on demand): `EndpointView.prefillTokens` and
 *   `req.promptTokens`; the claim adds the chosen endpoint's uncached share
 *   of the prompt, the first token takes it off.
 * - `prefix-hashes` (on demand): `req.prefixHashes`, hashed from the prompt
 *   on the main thread, and `ctx.prefixIndex`.
 * - `kv-blocks` (on demand): `req.tokenBlockKeys`, from an engine's
 *   /tokenize, and `ctx.kvIndex`, which the KV-events worker fills from the
 *   engines' KV-cache events.
 */
export const SCHEDULING_INPUTS = [
  "models",
  "readiness",
  "draining",
  "circuits",
  "gpu-faults",
  "engine-load",
  "inflight",
  "lora",
  "tried",
  "prefill-load",
  "prefix-hashes",
  "kv-blocks",
] as const;
export type SchedulingInput = (typeof SCHEDULING_INPUTS)[number];

/** Drops endpoints that cannot take the request. Keeps order. */
export interface Filter {
  readonly name: string;
  /** The inputs it reads (see SchedulingInput): startup wires those a configured filter names. */
  readonly consumes: readonly SchedulingInput[];
  filter(req: RequestView, endpoints: readonly EndpointView[], ctx: SchedulingContext): EndpointView[];
}

/** Scores each endpoint in [0,1], 1 is best; returns one score per endpoint, same order. */
export interface Scorer {
  readonly name: string;
  /** The inputs it reads (see SchedulingInput), those of a stand-in it calls included: startup wires those a scorer weighted above 0 names. */
  readonly consumes: readonly SchedulingInput[];
  score(req: RequestView, endpoints: readonly EndpointView[], ctx: SchedulingContext): number[];
}

/**
 * Chooses one endpoint from candidates and their weighted total scores;
 * undefined when none. `turn` counts the decisions the profile made before
 * this one (0 when absent), for pickers that take turns; others ignore it.
 */
export interface Picker {
  readonly name: string;
  pick(endpoints: readonly EndpointView[], totals: readonly number[], random: () => number, turn?: number): EndpointView | undefined;
}

/** The outcome of one scheduling decision, with what the metrics need. */
export interface Decision {
  readonly endpoint: EndpointView | undefined;
  /** Endpoints dropped by each filter (filter name → count). */
  readonly drops: Readonly<Record<string, number>>;
  /** The chosen endpoint's score from each scorer, before weighting (scorer name → score). */
  readonly scores: Readonly<Record<string, number>>;
  /** Endpoints left after the filters: those scored (0 when none was). */
  readonly candidates: number;
  /** The prompt tokens the chosen endpoint likely lacks, when the profile reads `prefill-load` (else 0): what the claim adds to its prefill load. */
  readonly prefillTokens: number;
}
