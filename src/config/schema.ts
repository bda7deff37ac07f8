/**
 * The wire form of llmgw.yaml as zod schemas: every key optional where a
 * default exists, snake_case as written by people. load.ts turns the parsed
 * wire form into the frozen, validated Config.
 */
import { z } from "zod";
import { ADMIN_DEFAULTS, adminSchema } from "./admin-config.ts";
import * as D from "./defaults.ts";
import { FLEET_DEFAULTS, fleetSchema, nodeSchema } from "./fleet-schema.ts";
import { endpointKvEventsSchema, KV_EVENTS_DEFAULTS, kvEventsSchema } from "./kv-events-config.ts";
import { FILTER_NAMES, PICKER_NAMES, ROUTE_NAMES, SCORER_NAMES } from "./plugin-names.ts";
import { RESPONSES_DEFAULTS, responsesSchema } from "./responses-config.ts";
import { SAME_ENDPOINT_POLICIES, type SameEndpointFailure } from "./retry-policy.ts";
import { STATE_DEFAULTS, stateSchema } from "./state-config.ts";
import { TRACING_DEFAULTS, tracingSchema } from "./tracing-config.ts";
import { upstreamCredentialKeys } from "./upstream-credentials.ts";
import { httpUrl, id, modelName } from "./wire-primitives.ts";

/** One check, so a malformed value gets one message (a regex and a port check side by side would both fire). */
const hostPort = z.string().superRefine((s, ctx) => {
  if (!/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]*):\d{1,5}$/.test(s)) ctx.addIssue({ code: "custom", message: `expected HOST:PORT, e.g. 127.0.0.1:8080, got '${s}'` });
  else if (Number(s.slice(s.lastIndexOf(":") + 1)) > 65535) ctx.addIssue({ code: "custom", message: "expected a port of at most 65535" });
});

/** Timers above 2^31-1 ms fire at once in Bun (and Node); a day is more than any deadline needs. */
const positiveMs = z.number().int().positive().max(86_400_000, { message: "expected at most 86400000 (24 h)" });

const deadlinesSchema = z
  .object({
    dial_ms: positiveMs.optional(),
    headers_ms: positiveMs.optional(),
    first_token_ms: positiveMs.optional(),
    idle_ms: positiveMs.optional(),
    total_ms: positiveMs.optional(),
  })
  .strict();

const modelSchema = z
  .object({
    name: modelName,
    aliases: z.array(modelName).default([]),
    /** Models tried in order when every endpoint of this one failed before the first byte. */
    fallback: z.array(modelName).default([]),
    deadlines: deadlinesSchema.default({}),
    /** false: this model's streams are never continued on another replica, and it is never a continuation target. */
    continuation: z.boolean().default(true),
  })
  .strict();

const endpointSchema = z
  .object({
    id,
    url: httpUrl,
    /** Models this endpoint serves; discovered from its /v1/models when omitted. */
    models: z.array(modelName).optional(),
    /** "listed": ready once /v1/models lists the models; "static": the configured models are authoritative (hosted providers, routers, aliases list other names), ready on /health alone. */
    models_source: z.enum(["listed", "static"]).default("listed"),
    pool: id.default("default"),
    engine: z.enum(["auto", "vllm", "sglang"]).default("auto"),
    /** GPUs (UUIDs or indices as DCGM labels them) this endpoint runs on; [] = every GPU its exporter reports. */
    gpu_ids: z.array(z.string().min(1)).default([]),
    /** The dcgm-exporter of the node this endpoint runs on; a faulted GPU there takes the endpoint out of rotation. */
    dcgm_url: httpUrl.optional(),
    /** false: never a continuation target (an upstream that rejects continue_final_message, e.g. a hosted API). */
    continuation: z.boolean().default(true),
    /** Where this endpoint's engine publishes vLLM's KV-cache events: the gateway indexes what it holds (precise-prefix scorer). */
    kv_events: endpointKvEventsSchema.optional(),
    /** The routes this endpoint serves (chat, responses, rerank …); absent: every route, less those it answers with FastAPI's 404 (learned). */
    routes: z.array(z.enum(ROUTE_NAMES)).min(1).optional(),
    /** The engine's API key (api_key_env or api_key_file) and extra headers, sent on every request to it. */
    ...upstreamCredentialKeys,
  })
  .strict();

const scorerEntry = z.object({ name: z.enum(SCORER_NAMES), weight: z.number().min(0).max(100).default(1) }).strict();

export const schedulingSchema = z
  .object({
    filters: z.array(z.enum(FILTER_NAMES)).default(["serves-model", "serves-adapter", "ready", "not-draining", "circuit-closed", "gpu-healthy"]),
    scorers: z.array(scorerEntry).default([
      { name: "queue-depth", weight: 2 },
      { name: "kv-cache", weight: 1 },
      { name: "inflight", weight: 2 },
      { name: "precise-prefix", weight: 3 },
      // 0 for every endpoint unless the request names a LoRA adapter.
      { name: "lora-affinity", weight: 6 },
    ]),
    picker: z.enum(PICKER_NAMES).default("max-score"),
    prefix_affinity: z
      .object({
        block_chars: z.number().int().min(16).max(65_536).default(D.DEFAULT_PREFIX_BLOCK_CHARS),
        max_blocks: z.number().int().min(1).max(1024).default(D.DEFAULT_PREFIX_MAX_BLOCKS),
        lru_entries: z.number().int().min(16).max(10_000_000).default(D.DEFAULT_PREFIX_LRU_ENTRIES),
      })
      .strict()
      .default({
        block_chars: D.DEFAULT_PREFIX_BLOCK_CHARS,
        max_blocks: D.DEFAULT_PREFIX_MAX_BLOCKS,
        lru_entries: D.DEFAULT_PREFIX_LRU_ENTRIES,
      }),
    /** The cache-affinity filter: when an endpoint is warm for a prompt, and how much prefill work it may have ahead before cold ones rejoin. */
    cache_affinity: z
      .object({
        threshold: z.number().gt(0).max(1).default(D.DEFAULT_CACHE_AFFINITY.threshold),
        peak_prefill_tokens_per_s: z.number().int().min(1).max(100_000_000).default(D.DEFAULT_CACHE_AFFINITY.peak_prefill_tokens_per_s),
        max_ttft_penalty_ms: z.number().int().min(0).max(3_600_000).default(D.DEFAULT_CACHE_AFFINITY.max_ttft_penalty_ms),
      })
      .strict()
      .default({ ...D.DEFAULT_CACHE_AFFINITY }),
  })
  .strict();

const healthSchema = z
  .object({
    poll_interval_ms: z.number().int().min(10).max(60_000).default(D.DEFAULT_HEALTH_POLL_INTERVAL_MS),
    timeout_ms: z.number().int().min(10).max(60_000).default(D.DEFAULT_HEALTH_TIMEOUT_MS),
    stale_after_ms: z.number().int().min(10).max(600_000).default(D.DEFAULT_METRICS_STALE_AFTER_MS),
    timeouts_before_unready: z.number().int().min(1).max(100).default(D.DEFAULT_HEALTH_TIMEOUTS_BEFORE_UNREADY),
  })
  .strict();

const sameEndpointPolicy = z.enum(SAME_ENDPOINT_POLICIES);

/** Per failure class, when it is retried on the same (endpoint, model); classes left out keep their default. */
const sameEndpointSchema = z
  .object({
    connect: sameEndpointPolicy.default(D.DEFAULT_RETRY_SAME_ENDPOINT.connect),
    status_5xx: sameEndpointPolicy.default(D.DEFAULT_RETRY_SAME_ENDPOINT.status_5xx),
    status_429: sameEndpointPolicy.default(D.DEFAULT_RETRY_SAME_ENDPOINT.status_429),
    headers_timeout: sameEndpointPolicy.default(D.DEFAULT_RETRY_SAME_ENDPOINT.headers_timeout),
    first_token_timeout: sameEndpointPolicy.default(D.DEFAULT_RETRY_SAME_ENDPOINT.first_token_timeout),
    truncated: sameEndpointPolicy.default(D.DEFAULT_RETRY_SAME_ENDPOINT.truncated),
    malformed: sameEndpointPolicy.default(D.DEFAULT_RETRY_SAME_ENDPOINT.malformed),
  } satisfies Record<SameEndpointFailure, z.ZodDefault<typeof sameEndpointPolicy>>)
  .strict();

const retrySchema = z
  .object({
    max_attempts: z.number().int().min(1).max(10).default(D.DEFAULT_RETRY_MAX_ATTEMPTS),
    budget_ratio: z.number().min(0).max(10).default(D.DEFAULT_RETRY_BUDGET_RATIO),
    min_per_s: z.number().min(0).default(D.DEFAULT_RETRY_MIN_PER_S),
    backoff_ms: z.number().int().min(0).max(60_000).default(D.DEFAULT_RETRY_BACKOFF_MS),
    max_retry_after_ms: z.number().int().min(0).max(600_000).default(D.DEFAULT_RETRY_MAX_AFTER_MS),
    same_endpoint: sameEndpointSchema.default(sameEndpointSchema.parse({})),
  })
  .strict();

const probeSchema = z
  .object({
    enabled: z.boolean().default(D.DEFAULT_CIRCUIT_PROBE_ENABLED),
    interval_ms: z.number().int().min(100).max(600_000).default(D.DEFAULT_CIRCUIT_PROBE_INTERVAL_MS),
    timeout_ms: z.number().int().min(100).max(600_000).default(D.DEFAULT_CIRCUIT_PROBE_TIMEOUT_MS),
  })
  .strict();

const circuitSchema = z
  .object({
    failure_threshold: z.number().int().min(1).max(1000).default(D.DEFAULT_CIRCUIT_FAILURE_THRESHOLD),
    open_ms: z.number().int().min(100).max(600_000).default(D.DEFAULT_CIRCUIT_OPEN_MS),
    /** The longest open period: it doubles after each failed probe up to this. */
    max_open_ms: z.number().int().min(100).max(3_600_000).default(D.DEFAULT_CIRCUIT_MAX_OPEN_MS),
    /** Active probing of open circuits by one-token requests of the gateway's own. */
    probe: probeSchema.default(probeSchema.parse({})),
  })
  .strict();

const bandName = z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/, { message: "expected a band name of lowercase letters, digits, '_' or '-'" });

const bandSchema = z
  .object({
    name: bandName,
    /** The band flows while its pool's saturation is below this; above 1 it never waits. */
    ceiling: z.number().min(0).max(100),
    queue_limit: z.number().int().min(0).max(1_000_000).default(D.DEFAULT_BAND_QUEUE_LIMIT),
    ttl_ms: z.number().int().min(1).max(3_600_000).default(D.DEFAULT_BAND_TTL_MS),
  })
  .strict();

const admissionSchema = z
  .object({
    enabled: z.boolean().default(true),
    /** Ordered, highest priority first. */
    bands: z
      .array(bandSchema)
      .min(1)
      .default(D.DEFAULT_BANDS.map((b) => ({ ...b }))),
    /** Band of requests whose key (or the anonymous tenant) names none. */
    default_band: bandName.default(D.DEFAULT_BAND),
    fairness: z.enum(["round-robin", "token-deficit"]).default("round-robin"),
    /** Token-deficit fairness: tokens a tenant may send per turn. */
    quantum_tokens: z.number().int().min(1).max(10_000_000).default(D.DEFAULT_QUANTUM_TOKENS),
    /** Batch capacity assumed for an endpoint until its running count shows more (set it to the engines' max-num-seqs when known). */
    initial_capacity: z.number().int().min(1).max(100_000).default(D.DEFAULT_INITIAL_CAPACITY),
    /** Saturation 1 means inflight = learned capacity × (1 + headroom). */
    headroom: z.number().min(0).max(10).default(D.DEFAULT_CAPACITY_HEADROOM),
    /** Engine metrics older than health.stale_after_ms: "ignore" them (inflight alone decides) or count the endpoint as "saturated". */
    stale_metrics: z.enum(["ignore", "saturated"]).default("ignore"),
    /** A band with a ceiling in (0, 1] may use room the bands above it have not needed lately (their peak over reserve_window_ms, plus a margin): batch fills idle GPUs instead of holding (1 − ceiling) of them back. */
    work_conserving: z.boolean().default(true),
    /** How far back the higher bands' peak demand is remembered when lending their room. */
    reserve_window_ms: z.number().int().min(100).max(3_600_000).default(D.DEFAULT_RESERVE_WINDOW_MS),
    /** Decide unsaturated requests on the main thread without a message to the scheduler worker (false: every request goes through the worker; for A/B measurement). */
    fast_path: z.boolean().default(true),
  })
  .strict();

const sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, { message: "expected 64 lowercase hex digits (sha256 of the key)" });

const apiKeySchema = z
  .object({
    /** sha256 of the key, hex. Preferred: the config then holds no secret. */
    key_sha256: sha256Hex.optional(),
    /** The key itself: accepted, with a warning at start. */
    key: z.string().min(8).optional(),
    tenant: id,
    /** The highest band this key may use; a request may ask for a lower one. */
    max_band: bandName.optional(),
  })
  .strict()
  .refine((k) => (k.key_sha256 === undefined) !== (k.key === undefined), { message: "expected exactly one of key_sha256 or key" });

const authSchema = z
  .object({
    /** Default: on when keys are configured. false: a trusted network, every request is the anonymous tenant (logged as a warning). */
    enabled: z.boolean().optional(),
    keys: z.array(apiKeySchema).default([]),
  })
  .strict();

const tenantSchema = z
  .object({
    name: id,
    requests_per_minute: z.number().int().min(1).optional(),
    tokens_per_minute: z.number().int().min(1).optional(),
  })
  .strict();

// --- Batch and Files API, idempotency, response cache, GPU-saturation shedding ---

const batchSchema = z
  .object({
    /** Largest JSONL upload accepted by POST /v1/files. */
    max_file_bytes: z
      .number()
      .int()
      .min(1024)
      .max(4 * 1024 * 1024 * 1024)
      .default(D.DEFAULT_BATCH_MAX_FILE_BYTES),
    max_lines: z.number().int().min(1).max(10_000_000).default(D.DEFAULT_BATCH_MAX_LINES),
    concurrency_per_batch: z.number().int().min(1).max(10_000).default(D.DEFAULT_BATCH_CONCURRENCY_PER_BATCH),
    concurrency_per_tenant: z.number().int().min(1).max(100_000).default(D.DEFAULT_BATCH_CONCURRENCY_PER_TENANT),
    max_attempts: z.number().int().min(1).max(100).default(D.DEFAULT_BATCH_MAX_ATTEMPTS),
    retry_backoff_ms: z.number().int().min(1).max(600_000).default(D.DEFAULT_BATCH_RETRY_BACKOFF_MS),
    lease_ms: z.number().int().min(1_000).max(86_400_000).default(D.DEFAULT_BATCH_LEASE_MS),
    max_line_bytes: z
      .number()
      .int()
      .min(1024)
      .max(256 * 1024 * 1024)
      .default(D.DEFAULT_BATCH_MAX_LINE_BYTES),
    max_line_depth: z.number().int().min(4).max(1_000).default(D.DEFAULT_BATCH_MAX_LINE_DEPTH),
    upload_memory_bytes: z
      .number()
      .int()
      .min(1024 * 1024)
      .max(16 * 1024 * 1024 * 1024)
      .default(D.DEFAULT_BATCH_UPLOAD_MEMORY_BYTES),
    upload_min_bytes_per_s: z
      .number()
      .int()
      .min(1)
      .max(1024 * 1024 * 1024)
      .default(D.DEFAULT_BATCH_UPLOAD_MIN_BYTES_PER_S),
    tenant_max_bytes: z.number().int().min(1024).max(Number.MAX_SAFE_INTEGER).default(D.DEFAULT_BATCH_TENANT_MAX_BYTES),
    tenant_max_files: z.number().int().min(1).max(100_000_000).default(D.DEFAULT_BATCH_TENANT_MAX_FILES),
  })
  .strict();

const idempotencySchema = z
  .object({
    ttl_s: z
      .number()
      .int()
      .min(1)
      .max(30 * 86_400)
      .default(D.DEFAULT_IDEMPOTENCY_TTL_S),
    wait_ms: z.number().int().min(0).max(600_000).default(D.DEFAULT_IDEMPOTENCY_WAIT_MS),
    max_response_bytes: z
      .number()
      .int()
      .min(1024)
      .max(1024 * 1024 * 1024)
      .default(D.DEFAULT_IDEMPOTENCY_MAX_RESPONSE_BYTES),
  })
  .strict();

const responseCacheSchema = z
  .object({
    /** Opt-in: only these models (names or aliases as configured) are cached. */
    models: z.array(modelName).default([]),
    max_bytes: z
      .number()
      .int()
      .min(1024)
      .max(64 * 1024 * 1024 * 1024)
      .default(D.DEFAULT_RESPONSE_CACHE_MAX_BYTES),
    max_entry_bytes: z
      .number()
      .int()
      .min(256)
      .max(1024 * 1024 * 1024)
      .default(D.DEFAULT_RESPONSE_CACHE_MAX_ENTRY_BYTES),
    ttl_s: z
      .number()
      .int()
      .min(1)
      .max(30 * 86_400)
      .default(D.DEFAULT_RESPONSE_CACHE_TTL_S),
  })
  .strict();

const gpuHealthSourceSchema = z
  .object({
    /** A dcgm-exporter /metrics URL. */
    url: httpUrl,
    /** The pool whose GPUs this exporter reports. */
    pool: id.default("default"),
    /** GPUs (UUIDs or indices) of this exporter that belong to the pool; [] = all it reports. */
    gpu_ids: z.array(z.string().min(1)).default([]),
  })
  .strict();

const gpuHealthSchema = z
  .object({
    /** DCGM exporters to watch; [] = the endpoints' dcgm_url, each for its endpoint's pool. */
    sources: z.array(gpuHealthSourceSchema).default([]),
    poll_interval_ms: z.number().int().min(100).max(600_000).default(D.DEFAULT_GPU_HEALTH_POLL_INTERVAL_MS),
    /** A GPU whose latest sample is older than this is not saturated (fail open). */
    stale_after_ms: z.number().int().min(100).max(3_600_000).default(D.DEFAULT_GPU_HEALTH_STALE_AFTER_MS),
    /** Samples in each GPU's ring: saturated only when all of them reach shed_util_pct. */
    sustained_samples: z.number().int().min(1).max(1_000).default(D.DEFAULT_GPU_SUSTAINED_SAMPLES),
    shed_util_pct: z.number().min(1).max(100).default(D.DEFAULT_GPU_SHED_UTIL_PCT),
    shed_batch: z.boolean().default(true),
    /** The band refused with 429 GPU_SATURATED while its pool is saturated. */
    shed_band: bandName.default(D.DEFAULT_GPU_SHED_BAND),
  })
  .strict();

// --- end of the batch block ---

// --- Mid-stream continuation on another replica ---

const continuationSchema = z
  .object({
    /** false: a stream that breaks after its first byte ends with its explicit error event, as before. */
    enabled: z.boolean().default(true),
    /** Continuations one request may get (each one also takes a retry from the retry budget). */
    max_recoveries: z.number().int().min(1).max(10).default(D.DEFAULT_CONTINUATION_MAX_RECOVERIES),
  })
  .strict();

// --- end of the continuation block ---

export const configSchema = z
  .object({
    listen: hostPort.default(D.DEFAULT_LISTEN),
    admin_listen: hostPort.default(D.DEFAULT_ADMIN_LISTEN),
    admin: adminSchema.default(ADMIN_DEFAULTS),
    metrics_listen: hostPort.nullable().default(null),
    log_level: z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]).default("info"),
    max_body_bytes: z
      .number()
      .int()
      .min(1024)
      .max(1024 * 1024 * 1024)
      .default(D.DEFAULT_MAX_BODY_BYTES),
    max_response_bytes: z
      .number()
      .int()
      .min(64 * 1024)
      .max(4 * 1024 * 1024 * 1024)
      .default(D.DEFAULT_MAX_RESPONSE_BYTES),
    /** Largest multipart upload to /v1/audio/transcriptions (the other routes' bodies are bounded by max_body_bytes). */
    max_audio_bytes: z
      .number()
      .int()
      .min(1024)
      .max(4 * 1024 * 1024 * 1024)
      .default(D.DEFAULT_MAX_AUDIO_BYTES),
    /** A pause this long in a request body, or an average under batch.upload_min_bytes_per_s once this long has passed, is cut with a 408 (every route). */
    body_read_timeout_ms: positiveMs.default(D.DEFAULT_BODY_READ_TIMEOUT_MS),
    /** Endpoint slots in the shared table: static endpoints plus every replica the fleet may add. */
    max_endpoints: z.number().int().min(1).max(4096).default(D.DEFAULT_MAX_ENDPOINTS),
    /** Absent: sized at start to what the open-files limit holds, at most DEFAULT_MAX_OPEN_STREAMS. */
    max_open_streams: z.number().int().min(1).max(10_000_000).optional(),
    deadlines: deadlinesSchema.default({}),
    models: z.array(modelSchema).default([]),
    endpoints: z.array(endpointSchema).default([]),
    scheduling: schedulingSchema.default(schedulingSchema.parse({})),
    health: healthSchema.default(healthSchema.parse({})),
    retry: retrySchema.default(retrySchema.parse({})),
    circuit_breaker: circuitSchema.default(circuitSchema.parse({})),
    continuation: continuationSchema.default(continuationSchema.parse({})),
    auth: authSchema.default(authSchema.parse({})),
    tenants: z.array(tenantSchema).default([]),
    admission: admissionSchema.default(admissionSchema.parse({})),
    // Batch and Files API, idempotency, response cache, GPU-saturation shedding.
    data_dir: z.string().min(1).default(D.DEFAULT_DATA_DIR),
    batch: batchSchema.default(batchSchema.parse({})),
    idempotency: idempotencySchema.default(idempotencySchema.parse({})),
    response_cache: responseCacheSchema.default(responseCacheSchema.parse({})),
    /** Absent: no GPU-saturation shedding at all (nothing changes). */
    gpu_health: gpuHealthSchema.optional(),
    // Fleet manager: agents and desired models (state under data_dir above).
    nodes: z.array(nodeSchema).default([]),
    fleet: fleetSchema.default(FLEET_DEFAULTS),
    // Shared state across gateways: sqlite (default, one process) or redis.
    state: stateSchema.default(STATE_DEFAULTS),
    /** The gateway's side of engines' KV-cache events: block index, staleness, tokenization. */
    kv_events: kvEventsSchema.default(KV_EVENTS_DEFAULTS),
    // The Responses API's stored state and background responses.
    responses: responsesSchema.default(RESPONSES_DEFAULTS),
    /** OpenTelemetry traces (OTLP/HTTP); off unless enabled here or an OTLP endpoint variable is set. */
    tracing: tracingSchema.default(TRACING_DEFAULTS),
  })
  .strict();

export type ParsedConfig = z.output<typeof configSchema>;
