/** Named defaults, with units in their names. */

export const DEFAULT_LISTEN = "0.0.0.0:8080";
export const DEFAULT_ADMIN_LISTEN = "127.0.0.1:9090";

export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;
/** A request body must arrive within this. */
export const DEFAULT_BODY_READ_TIMEOUT_MS = 10_000;
/** A non-streaming engine answer larger than this is refused (502), never buffered whole. */
export const DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024 * 1024;
/** Endpoint slots: configured endpoints plus the replicas a fleet adds at run time. */
export const DEFAULT_MAX_ENDPOINTS = 256;

/** Concurrent streams the gateway is sized for; checked against the open-files limit at start (2 sockets each). */
export const DEFAULT_MAX_OPEN_STREAMS = 10_000;

// The five deadlines of one upstream attempt.
export const DEFAULT_DIAL_TIMEOUT_MS = 2_000;
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
/** Long prompts prefill for a while; this bounds the wait for the first token after headers. */
export const DEFAULT_FIRST_TOKEN_TIMEOUT_MS = 60_000;
export const DEFAULT_IDLE_TIMEOUT_MS = 30_000;
export const DEFAULT_TOTAL_TIMEOUT_MS = 600_000;

export const DEFAULT_HEALTH_POLL_INTERVAL_MS = 250;
export const DEFAULT_HEALTH_TIMEOUT_MS = 1_000;
/**
 * Polls in a row that only timed out before a ready endpoint leaves rotation
 * (Kubernetes' readinessProbe failureThreshold default): an engine whose API
 * server is slow for a moment under load is not ejected by one late answer.
 */
export const DEFAULT_HEALTH_TIMEOUTS_BEFORE_UNREADY = 3;
/** Engine metrics older than this are treated as absent. */
export const DEFAULT_METRICS_STALE_AFTER_MS = 2_000;

export const DEFAULT_RETRY_MAX_ATTEMPTS = 3;
/** Retries may add at most this fraction on top of first attempts (a token bucket). */
export const DEFAULT_RETRY_BUDGET_RATIO = 0.2;
/** Retries are always allowed at this rate per second, even with an empty budget. */
export const DEFAULT_RETRY_MIN_PER_S = 10;
export const DEFAULT_RETRY_BACKOFF_MS = 25;
/** The longest engine Retry-After honoured before giving up on that endpoint. */
export const DEFAULT_RETRY_MAX_AFTER_MS = 2_000;
/**
 * When a failure before the first byte is retried on the same (endpoint,
 * model), once no other endpoint of the model is left: "before_fallback"
 * (transient by nature: a 429 after its Retry-After, a single 500, a refused
 * connection), "last_resort" (only when no fallback model is left either: a
 * timeout is not a blip, and waiting it out again costs the client another
 * full deadline), or "never".
 */
export const DEFAULT_RETRY_SAME_ENDPOINT = {
  connect: "before_fallback",
  status_5xx: "before_fallback",
  status_429: "before_fallback",
  headers_timeout: "last_resort",
  first_token_timeout: "last_resort",
  truncated: "before_fallback",
  malformed: "before_fallback",
} as const;

export const DEFAULT_CIRCUIT_FAILURE_THRESHOLD = 5;
export const DEFAULT_CIRCUIT_OPEN_MS = 5_000;
/** Without active probing: the open period doubles after each failed probe request, up to this. */
export const DEFAULT_CIRCUIT_MAX_OPEN_MS = 30_000;
/** An open circuit is probed by the gateway itself (a one-token request), not by a client's request. */
export const DEFAULT_CIRCUIT_PROBE_ENABLED = true;
/** Between active probes of a circuit still open: a recovery is noticed within about this (plus the probe itself). */
export const DEFAULT_CIRCUIT_PROBE_INTERVAL_MS = 2_000;
/** An active probe's own deadline (dial, headers, first token and total together). */
export const DEFAULT_CIRCUIT_PROBE_TIMEOUT_MS = 5_000;

/** Mid-stream continuations one request may get. */
export const DEFAULT_CONTINUATION_MAX_RECOVERIES = 2;

export const DEFAULT_PREFIX_BLOCK_CHARS = 256;
export const DEFAULT_PREFIX_MAX_BLOCKS = 16;
export const DEFAULT_PREFIX_LRU_ENTRIES = 100_000;
/** cache-affinity: warm at 80 % of the prompt held; llm-d's calibrated Qwen3-32B / H100 TP2 path (15,928 prompt tokens/s) and its 18 s TTFT penalty, a lead of ~286,700 tokens. */
export const DEFAULT_CACHE_AFFINITY = { threshold: 0.8, peak_prefill_tokens_per_s: 15_928, max_ttft_penalty_ms: 18_000 } as const;

// Admission.
export const DEFAULT_BAND_QUEUE_LIMIT = 1_000;
export const DEFAULT_BAND_TTL_MS = 30_000;
export const DEFAULT_QUANTUM_TOKENS = 1_000;
export const DEFAULT_INITIAL_CAPACITY = 8;
/** Bands with a ceiling of 1 may fill the learned batch capacity plus this fraction (a little engine-side queueing). */
export const DEFAULT_CAPACITY_HEADROOM = 0.1;
export const DEFAULT_BAND = "standard";
/** Work-conserving admission remembers the higher bands' peak this long before lending their room. */
export const DEFAULT_RESERVE_WINDOW_MS = 30_000;
/** Highest priority first: interactive traffic never waits; batch degrades first. */
export const DEFAULT_BANDS: readonly { name: string; ceiling: number; queue_limit: number; ttl_ms: number }[] = [
  { name: "interactive", ceiling: 2, queue_limit: 1_000, ttl_ms: 30_000 },
  { name: "standard", ceiling: 1, queue_limit: 5_000, ttl_ms: 60_000 },
  { name: "batch", ceiling: 0.6, queue_limit: 20_000, ttl_ms: 600_000 },
];

// Fleet manager. The state directory is DEFAULT_DATA_DIR below, shared with the batch store.
export const DEFAULT_AGENT_POLL_INTERVAL_MS = 1_000;
/** An agent's GET /v1/state runs nvidia-smi (cached 1 s); allow it more than an engine probe. */
export const DEFAULT_AGENT_POLL_TIMEOUT_MS = 3_000;
/** A DELETE waits for the engine's process group to exit (SIGTERM grace + SIGKILL), so agent calls get longer than polls. */
export const DEFAULT_AGENT_CALL_TIMEOUT_MS = 30_000;
/** A node that has not answered for this long is NotReady and its replicas leave rotation. */
export const DEFAULT_NODE_NOT_READY_AFTER_MS = 10_000;
export const DEFAULT_RECONCILE_INTERVAL_MS = 1_000;
/** Drain and scale-down stop a replica after this long even with requests still open or no replacement serving. */
export const DEFAULT_DRAIN_GRACE_MS = 120_000;
/** A replica not Ready after this long is failed and replaced (weights of a large model take minutes to load). */
export const DEFAULT_REPLICA_READY_TIMEOUT_MS = 900_000;
export const DEFAULT_FAILURE_BACKOFF_BASE_MS = 2_000;
export const DEFAULT_FAILURE_BACKOFF_MAX_MS = 300_000;
/** How often a self-registered agent is asked to register again. */
export const DEFAULT_REGISTRATION_INTERVAL_MS = 30_000;
/** GPU slots of a fleet replica with LoRA adapters (vLLM's own default, 1, would serve one adapter at a time). */
export const DEFAULT_FLEET_MAX_LORAS = 4;
/** An adapter no request has used on a replica for this long is unloaded there. */
export const DEFAULT_ADAPTER_IDLE_UNLOAD_MS = 300_000;
/** How long a request for a declared adapter loaded nowhere waits for the fleet to load it before a 503. */
export const DEFAULT_ADAPTER_LOAD_WAIT_MS = 30_000;
/** Adapters one fleet model may declare. */
export const MAX_FLEET_ADAPTERS = 1_000;
// Batch and Files API, idempotency, response cache, GPU-saturation shedding.
/** Where the embedded store (bun:sqlite) keeps what must survive a restart. */
export const DEFAULT_DATA_DIR = "./.llmgw-data";
/** OpenAI's own limits for a batch input file: 200 MB and 50,000 requests. */
export const DEFAULT_BATCH_MAX_FILE_BYTES = 200 * 1024 * 1024;
export const DEFAULT_BATCH_MAX_LINES = 50_000;
export const DEFAULT_BATCH_CONCURRENCY_PER_BATCH = 16;
export const DEFAULT_BATCH_CONCURRENCY_PER_TENANT = 32;
/** Attempts of a line that fails with a 5xx or a transport error before it is recorded as failed. */
export const DEFAULT_BATCH_MAX_ATTEMPTS = 3;
/** Wait before re-driving a line after a transient failure or a saturation refusal without Retry-After. */
export const DEFAULT_BATCH_RETRY_BACKOFF_MS = 1_000;
/** A claimed line whose runner stopped renewing its lease for this long is re-driven by another. */
export const DEFAULT_BATCH_LEASE_MS = 60_000;
/** Longest line of an input file: far above any request a batch endpoint takes, far below what would strain memory. */
export const DEFAULT_BATCH_MAX_LINE_BYTES = 4 * 1024 * 1024;
/** Deepest nesting of a line's JSON: messages with content parts and tool schemas stay well within it. */
export const DEFAULT_BATCH_MAX_LINE_DEPTH = 64;
/** Bytes all uploads together may hold in memory (each holds its line still open and the chunk in hand). */
export const DEFAULT_BATCH_UPLOAD_MEMORY_BYTES = 64 * 1024 * 1024;
/** A request body slower than this on average (after body_read_timeout_ms) is cut with 408: a drip holds a connection for nothing. */
export const DEFAULT_BATCH_UPLOAD_MIN_BYTES_PER_S = 64 * 1024;
/** Per tenant: bytes of stored files (uploads and batch outputs) and their number. */
export const DEFAULT_BATCH_TENANT_MAX_BYTES = 10 * 1024 * 1024 * 1024;
export const DEFAULT_BATCH_TENANT_MAX_FILES = 10_000;
/** Stripe and OpenAI keep idempotency keys for 24 hours. */
export const DEFAULT_IDEMPOTENCY_TTL_S = 86_400;
/** A retry that arrives while the first request runs waits this long for it, then gets 409. */
export const DEFAULT_IDEMPOTENCY_WAIT_MS = 10_000;
/** A response larger than this is not recorded: a retry runs again instead of replaying. */
export const DEFAULT_IDEMPOTENCY_MAX_RESPONSE_BYTES = 8 * 1024 * 1024;
export const DEFAULT_RESPONSE_CACHE_MAX_BYTES = 64 * 1024 * 1024;
export const DEFAULT_RESPONSE_CACHE_MAX_ENTRY_BYTES = 1024 * 1024;
export const DEFAULT_RESPONSE_CACHE_TTL_S = 600;
export const DEFAULT_GPU_HEALTH_POLL_INTERVAL_MS = 1_000;
export const DEFAULT_GPU_HEALTH_STALE_AFTER_MS = 5_000;
export const DEFAULT_GPU_SUSTAINED_SAMPLES = 5;
export const DEFAULT_GPU_SHED_UTIL_PCT = 95;
export const DEFAULT_GPU_SHED_BAND = "batch";
// Shared state across gateways: the `state` block.
export const DEFAULT_STATE_KEY_PREFIX = "llmgw:";
/** A dead leader is replaced within this; renewed every third of it. */
export const DEFAULT_STATE_LEASE_MS = 5_000;
/** Demand exchange and follower refresh: "about once a second". */
export const DEFAULT_STATE_SYNC_INTERVAL_MS = 1_000;
/** 2 % of a per-minute limit per fetch: with 3 gateways at most 6 % of a minute's quota sits unspent in allowances. */
export const DEFAULT_STATE_QUOTA_ALLOWANCE = 0.02;
export const DEFAULT_STATE_COMMAND_TIMEOUT_MS = 1_000;
// The Responses API's state and vLLM's other routes.
/** OpenAI keeps stored responses for 30 days. */
export const DEFAULT_RESPONSES_STORE_TTL_S = 30 * 86_400;
export const DEFAULT_RESPONSES_MAX_STORED_BYTES_PER_TENANT = 256 * 1024 * 1024;
export const DEFAULT_RESPONSES_MAX_RECORD_BYTES = 16 * 1024 * 1024;
export const DEFAULT_RESPONSES_BACKGROUND_CONCURRENCY = 16;
/** OpenAI's limit for an audio upload (/v1/audio/transcriptions): 25 MB. */
export const DEFAULT_MAX_AUDIO_BYTES = 25 * 1024 * 1024;
// OpenTelemetry traces: the `tracing` block (the OTel SDK's own defaults where it has one).
export const DEFAULT_TRACING_SERVICE_NAME = "llmgw";
/** OTLP/HTTP's default traces URL (a collector on this host). */
export const DEFAULT_TRACING_ENDPOINT = "http://localhost:4318/v1/traces";
/** Spans waiting for export; past it new spans are dropped and counted (OTEL_BSP_MAX_QUEUE_SIZE's default). */
export const DEFAULT_TRACING_MAX_QUEUE_SPANS = 2048;
/** Spans per export request (OTEL_BSP_MAX_EXPORT_BATCH_SIZE's default). */
export const DEFAULT_TRACING_MAX_BATCH_SPANS = 512;
/** How often a partial batch is sent (OTEL_BSP_SCHEDULE_DELAY's default). */
export const DEFAULT_TRACING_EXPORT_INTERVAL_MS = 5_000;
/** An export request unanswered this long is given up (OTEL_EXPORTER_OTLP_TIMEOUT's default). */
export const DEFAULT_TRACING_EXPORT_TIMEOUT_MS = 10_000;
