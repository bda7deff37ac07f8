/** Named defaults, with units in their names. */

export const DEFAULT_LISTEN = "0.0.0.0:8080";
export const DEFAULT_ADMIN_LISTEN = "127.0.0.1:9090";

export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;

// The five deadlines of one upstream attempt.
export const DEFAULT_DIAL_TIMEOUT_MS = 2_000;
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
/** Long prompts prefill for a while; this bounds the wait for the first token after headers. */
export const DEFAULT_FIRST_TOKEN_TIMEOUT_MS = 60_000;
export const DEFAULT_IDLE_TIMEOUT_MS = 30_000;
export const DEFAULT_TOTAL_TIMEOUT_MS = 600_000;

export const DEFAULT_HEALTH_POLL_INTERVAL_MS = 250;
export const DEFAULT_HEALTH_TIMEOUT_MS = 1_000;
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

export const DEFAULT_CIRCUIT_FAILURE_THRESHOLD = 5;
export const DEFAULT_CIRCUIT_OPEN_MS = 5_000;

export const DEFAULT_PREFIX_BLOCK_CHARS = 256;
export const DEFAULT_PREFIX_MAX_BLOCKS = 16;
export const DEFAULT_PREFIX_LRU_ENTRIES = 100_000;
