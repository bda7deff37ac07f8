/** The validated, frozen configuration the rest of llmgw reads (defaults applied). */

import type { LogLevel } from "../shared/logger.ts";
import type { KvEventsConfig, KvEventsSource } from "./kv-events-config.ts";
import type { FilterName, PickerName, RouteName as Route, ScorerName } from "./plugin-names.ts";
import type { ResponsesConfig } from "./responses-config.ts";
import type { SameEndpointFailure, SameEndpointPolicy } from "./retry-policy.ts";

/** Where state shared by gateways lives: the embedded bun:sqlite store, or Redis shared by several gateways. */
export type StateBackendName = "sqlite" | "redis";

/** OTLP/HTTP's two encodings (gRPC is not spoken). */
export type OtlpProtocol = "http/protobuf" | "http/json";

/** The `tracing` block with the OTEL_* variables applied (src/config/tracing-config.ts); null when tracing is off. */
export interface TracingConfig {
  /** The full OTLP traces URL (…/v1/traces). */
  endpoint: string;
  protocol: OtlpProtocol;
  /** Sent with every export (a collector's or vendor's auth). Secrets: never logged. */
  headers: Readonly<Record<string, string>>;
  serviceName: string;
  /** Root sampler: the share of traces started here that are kept; a client's sampled flag decides for its own (parent-based) unless `parentBased` is false. */
  sampleRatio: number;
  parentBased: boolean;
  maxQueueSpans: number;
  maxBatchSpans: number;
  exportIntervalMs: number;
  exportTimeoutMs: number;
}

/** The `state` block, validated (src/config/state-config.ts has the wire form). */
export interface StateConfig {
  backend: StateBackendName;
  /** Set when backend is redis. */
  redisUrl: string | undefined;
  keyPrefix: string;
  /** undefined: the gateway names itself (host and pid). */
  gatewayId: string | undefined;
  leaseMs: number;
  syncIntervalMs: number;
  quotaAllowance: number;
  commandTimeoutMs: number;
}

export interface Deadlines {
  dialMs: number;
  headersMs: number;
  firstTokenMs: number;
  idleMs: number;
  totalMs: number;
}

export interface ModelConfig {
  name: string;
  aliases: readonly string[];
  fallback: readonly string[];
  deadlines: Deadlines;
}

export interface CircuitBreakerConfig {
  failureThreshold: number;
  /** Open this long before the first active probe (or, without probing, before half-open). */
  openMs: number;
  /** Without probing: the open period doubles after a failed probe request up to this. */
  maxOpenMs: number;
  /** Active probing of open circuits: one-token requests of the gateway's own. */
  probe: { enabled: boolean; intervalMs: number; timeoutMs: number };
}

export type EngineFlavor = "auto" | "vllm" | "sglang";

export interface EndpointConfig {
  id: string;
  url: string;
  /** undefined: discovered from the endpoint's /v1/models. */
  models: readonly string[] | undefined;
  /** "static": the configured models are authoritative (ready on /health alone). */
  modelsSource: "listed" | "static";
  pool: string;
  engine: EngineFlavor;
  gpuIds: readonly string[];
  /** dcgm-exporter URL of the endpoint's node, if GPU health is watched. */
  dcgmUrl: string | undefined;
  /** Where its engine publishes KV-cache events; undefined: none configured. */
  kvEvents: KvEventsSource | undefined;
  /** The routes it serves; undefined: every route, less those it answers with a 404 for the path (learned). */
  routes?: readonly Route[];
  /** Sent with every request to its engine: configured headers and `authorization` from api_key_env/api_key_file (a secret: never logged). */
  upstreamHeaders?: Readonly<Record<string, string>>;
}

export interface Listen {
  host: string;
  port: number;
}

interface BandConfig {
  name: string;
  /** Flows while pool saturation < ceiling; > 1 never waits. */
  ceiling: number;
  queueLimit: number;
  ttlMs: number;
}

interface ApiKeyConfig {
  /** sha256 of the key, lowercase hex. */
  sha256: string;
  tenant: string;
  /** Index into admission.bands of the highest band this key may use. */
  maxBand: number;
}

export interface TenantConfig {
  name: string;
  requestsPerMinute: number | undefined;
  tokensPerMinute: number | undefined;
}

export interface AdmissionConfig {
  enabled: boolean;
  /** Highest priority first. */
  bands: readonly BandConfig[];
  /** Index into bands. */
  defaultBand: number;
  fairness: "round-robin" | "token-deficit";
  quantumTokens: number;
  initialCapacity: number;
  headroom: number;
  staleMetrics: "ignore" | "saturated";
  /** Bands below a higher one may use room it has not needed in the last reserveWindowMs. */
  workConserving: boolean;
  reserveWindowMs: number;
  /** Decide unsaturated requests on the main thread (false: everything through the scheduler worker). */
  fastPath: boolean;
}

// Fleet manager.
type FleetEngine = "vllm" | "sglang" | "sim";

/** A desired model: what to run and how many replicas. */
export interface FleetModelSpec {
  name: string;
  engine: FleetEngine;
  replicas: number;
  /** GPUs per node of one replica (tensor parallel). */
  tensorParallel: number;
  /** Nodes one replica spans (pipeline parallel across them). */
  nodesPerReplica: number;
  gpuClass: string | undefined;
  minGpuMemoryGiB: number | undefined;
  quantization: string | undefined;
  engineArgs: readonly string[];
  pool: string;
  maxNumSeqs: number | undefined;
  gpuMemoryUtilization: number | undefined;
  /** sim engine only. */
  startupMs: number | undefined;
  /** LoRA adapters the fleet may load onto this model's replicas (loaded where requests for them arrive, unloaded when idle). */
  adapters: readonly FleetAdapterSpec[];
  /** Replicas start with LoRA on: present exactly when there are adapters. */
  lora: FleetLoraSettings | undefined;
  /** The variable holding the replicas' API key, on the agents and on the gateway; absent: no key. */
  apiKeyEnv?: string;
  /** The autoscaler sets `replicas` within these bounds; absent: operators do. */
  autoscaling?: FleetAutoscalingSpec;
}

/** A model's autoscaling as configured; what is absent takes the autoscaler's defaults. */
export interface FleetAutoscalingSpec {
  minReplicas: number;
  maxReplicas: number;
  slo: { ttftMs: number; itlMs: number; percentile?: number };
  law?: "capacity" | "latency";
  intervalMs?: number;
  scaleUpWindowMs?: number;
  scaleDownWindowMs?: number;
  maxSurge?: number;
  scaleDownEveryMs?: number;
  targetUtilization?: number;
  assumedStartupMs?: number;
  /** Prompt tokens one replica prefills a second at full load (measured); absent: learned from traffic. */
  promptTokensPerReplicaS?: number;
  /** Idle, down to zero replicas; the next request waits up to coldStartWaitMs for one. */
  scaleToZero?: boolean;
  coldStartWaitMs?: number;
}

interface FleetAdapterSpec {
  /** The name requests use as their model. */
  name: string;
  /** Where the engine reads it (a directory, or what vLLM's resolver takes). */
  path: string;
}

interface FleetLoraSettings {
  /** GPU slots (--max-loras). */
  maxLoras: number;
  /** --max-lora-rank; absent: the engine's default. */
  maxLoraRank?: number;
  /** --max-cpu-loras; absent: the engine's default (max_loras). */
  maxCpuLoras?: number;
}

/** A node agent listed in the config (agents may also register themselves). */
export interface NodeConfig {
  name: string;
  url: string;
  token: string;
  dcgmUrl: string | undefined;
}

export interface FleetConfig {
  models: readonly FleetModelSpec[];
  adminToken: string | undefined;
  registrationToken: string | undefined;
  agentPollIntervalMs: number;
  agentPollTimeoutMs: number;
  agentCallTimeoutMs: number;
  nodeNotReadyAfterMs: number;
  reconcileIntervalMs: number;
  drainGraceMs: number;
  replicaReadyTimeoutMs: number;
  failureBackoffBaseMs: number;
  failureBackoffMaxMs: number;
  registrationIntervalMs: number;
  /** An adapter unused on a replica for this long is unloaded there. */
  adapterIdleUnloadMs: number;
  /** How long a request for a declared adapter loaded nowhere waits for a load. */
  adapterLoadWaitMs: number;
}

// --- Batch and Files API, idempotency, response cache, GPU-saturation shedding ---

export interface BatchConfig {
  maxFileBytes: number;
  maxLines: number;
  concurrencyPerBatch: number;
  concurrencyPerTenant: number;
  /** Attempts of a line failing with a 5xx or transport error before it is recorded as failed. */
  maxAttempts: number;
  retryBackoffMs: number;
  /** Visibility timeout of a claimed line (renewed while its runner lives). */
  leaseMs: number;
  /** Longest line of an input file (400 beyond). */
  maxLineBytes: number;
  /** Deepest JSON nesting of a line (400 beyond). */
  maxLineDepth: number;
  /** Bytes all uploads together may hold in memory (503 UPLOAD_BUDGET_EXHAUSTED beyond). */
  uploadMemoryBytes: number;
  /** Slowest average rate of any request body once past body_read_timeout_ms (408 below). */
  uploadMinBytesPerS: number;
  /** Per tenant: stored bytes and files (403 STORAGE_QUOTA_EXCEEDED beyond). */
  tenantMaxBytes: number;
  tenantMaxFiles: number;
}

export interface IdempotencyConfig {
  ttlMs: number;
  /** How long a retry waits for the first request with its key to finish before a 409. */
  waitMs: number;
  maxResponseBytes: number;
}

export interface ResponseCacheConfig {
  /** Opt-in models (names or aliases); empty: the cache is off. */
  models: readonly string[];
  maxBytes: number;
  maxEntryBytes: number;
  ttlMs: number;
}

export interface GpuHealthSource {
  url: string;
  pool: string;
  /** [] = every GPU the exporter reports. */
  gpuIds: readonly string[];
}

export interface GpuHealthConfig {
  /** Explicit exporters, or (when none is configured) the endpoints' dcgm_url with their pools. */
  sources: readonly GpuHealthSource[];
  /** No explicit sources: every endpoint's dcgm_url is watched for its pool, fleet replicas joining at run time included. */
  sourcesFromEndpoints: boolean;
  pollIntervalMs: number;
  staleAfterMs: number;
  sustainedSamples: number;
  shedUtilPct: number;
  shedBatch: boolean;
  /** Index into admission.bands of the band that is shed. */
  shedBand: number;
}

// --- end of the batch block ---

/** Mid-stream continuation on another replica. */
export interface ContinuationConfig {
  enabled: boolean;
  maxRecoveries: number;
  /** Models (canonical names) whose streams are never continued and that are never a target. */
  offModels: readonly string[];
  /** Endpoint ids that are never a continuation target. */
  offEndpoints: readonly string[];
}

/** The admin listener's door (src/config/admin-config.ts). */
export interface AdminConfig {
  /** Needed by every state-changing admin request (admin.token, else fleet.admin_token); undefined: every change is refused. */
  token: string | undefined;
  /** Lower-case host names the admin listener answers to besides its own address. */
  allowedHosts: readonly string[];
}

export interface Config {
  listen: Listen;
  adminListen: Listen;
  admin: AdminConfig;
  metricsListen: Listen | null;
  logLevel: LogLevel;
  maxBodyBytes: number;
  /** Largest transcription upload (multipart). */
  maxAudioBytes: number;
  /** Largest non-streaming engine answer relayed (larger: 502 UPSTREAM_RESPONSE_TOO_LARGE). */
  maxResponseBytes: number;
  /** A pause this long in a request body is a 408, and past it an average under batch.uploadMinBytesPerS, ms (every route). */
  bodyReadTimeoutMs: number;
  /** Slots in the shared endpoint table. */
  maxEndpoints: number;
  /**
   * Concurrent streams the gateway is sized for, as the operator set it:
   * checked against the open-files limit at start. undefined: not set, sized
   * at start to what the limit holds (at most DEFAULT_MAX_OPEN_STREAMS).
   */
  maxOpenStreams: number | undefined;
  /** Deadlines for models not listed under `models` (and the base for those that are). */
  deadlines: Deadlines;
  models: readonly ModelConfig[];
  endpoints: readonly EndpointConfig[];
  scheduling: {
    filters: readonly FilterName[];
    scorers: readonly { name: ScorerName; weight: number }[];
    picker: PickerName;
    prefixAffinity: { blockChars: number; maxBlocks: number; lruEntries: number };
    /** The cache-affinity filter: warm at `threshold` of the prompt held; cold endpoints rejoin `peakPrefillTokensPerS × maxTtftPenaltyMs` tokens of prefill load below the least loaded warm one. */
    cacheAffinity: { threshold: number; peakPrefillTokensPerS: number; maxTtftPenaltyMs: number };
    /** What stands in for precise-prefix where an engine's event stream is stale or absent: the gateway's own estimate (absent: it), or rendezvous hashing with several gateways (state.backend redis). */
    preciseStandIn?: "prefix-affinity" | "prefix-rendezvous";
  };
  /** The gateway's side of engines' KV-cache events. */
  kvEvents: KvEventsConfig;
  health: {
    pollIntervalMs: number;
    timeoutMs: number;
    staleAfterMs: number;
    /** Polls in a row that only timed out before a ready endpoint is taken out of rotation (an answer that says not ready takes it out at once). */
    timeoutsBeforeUnready: number;
  };
  retry: {
    maxAttempts: number;
    budgetRatio: number;
    minPerS: number;
    backoffMs: number;
    maxRetryAfterMs: number;
    /** Per failure class, when it is retried on the same (endpoint, model). */
    sameEndpoint: Readonly<Record<SameEndpointFailure, SameEndpointPolicy>>;
  };
  circuitBreaker: CircuitBreakerConfig;
  continuation: ContinuationConfig;
  auth: { enabled: boolean; keys: readonly ApiKeyConfig[] };
  /** Configured tenants (quotas); keys may name tenants without an entry (no quota). */
  tenants: readonly TenantConfig[];
  admission: AdmissionConfig;
  // Batch and Files API, idempotency, response cache, GPU-saturation shedding.
  /** Directory of the embedded stores (batch jobs, files, idempotency records; fleet desired state, cordons, drains). */
  dataDir: string;
  batch: BatchConfig;
  idempotency: IdempotencyConfig;
  responseCache: ResponseCacheConfig;
  /** null: no gpu_health block, nothing is shed. */
  gpuHealth: GpuHealthConfig | null;
  // Fleet manager.
  nodes: readonly NodeConfig[];
  fleet: FleetConfig;
  // Shared state across gateways.
  state: StateConfig;
  /** OpenTelemetry traces; null: off (the request path does nothing for them). */
  tracing: TracingConfig | null;
  /** The Responses API's stored state and background responses. */
  responses: ResponsesConfig;
  /** Things worth a warning at start (plaintext keys, auth off); logged by serve. */
  warnings: readonly string[];
  /**
   * The validated document in its wire form (snake_case keys, defaults
   * applied, the scorers in effect): what `serve --print-config` prints,
   * secrets masked there. Holds secrets: never log it as it is.
   */
  document: Readonly<Record<string, unknown>>;
}
