/**
 * One error type with stable machine codes, mapped to an HTTP status and an
 * OpenAI-shaped body `{"error":{"message","type","param","code"}}` in one
 * switch. Errors crossing postMessage travel as `{code, message}`.
 */

export type ErrorCode =
  // request validation
  | "INVALID_JSON"
  | "INVALID_REQUEST"
  | "BODY_TOO_LARGE"
  | "BODY_READ_TIMEOUT"
  | "MODEL_NOT_FOUND"
  | "NOT_FOUND"
  | "METHOD_NOT_ALLOWED"
  | "CONTEXT_LENGTH_EXCEEDED"
  | "PREVIOUS_RESPONSE_NOT_FOUND"
  // auth and quota
  | "INVALID_API_KEY"
  | "RATE_LIMITED"
  | "MODEL_NOT_ALLOWED"
  // admission and capacity
  | "NO_READY_ENDPOINT"
  | "ROUTE_NOT_SERVED"
  | "ADMISSION_QUEUE_FULL"
  | "ADMISSION_TTL_EXPIRED"
  | "GPU_SATURATED"
  // upstream
  | "UPSTREAM_CONNECT_FAILED"
  | "UPSTREAM_HEADERS_TIMEOUT"
  | "UPSTREAM_FIRST_TOKEN_TIMEOUT"
  | "UPSTREAM_IDLE_TIMEOUT"
  | "UPSTREAM_TOTAL_TIMEOUT"
  | "UPSTREAM_ERROR"
  | "UPSTREAM_REJECTED"
  | "UPSTREAM_UNAUTHORIZED"
  | "UPSTREAM_RATE_LIMITED"
  | "UPSTREAM_STREAM_TRUNCATED"
  | "UPSTREAM_MALFORMED"
  | "UPSTREAM_RESPONSE_TOO_LARGE"
  | "RETRY_BUDGET_EXHAUSTED"
  // engine (sim-engine, agent)
  | "ENGINE_DEAD"
  | "ENGINE_OVERLOADED"
  | "INJECTED_FAULT"
  // agent / control
  | "UNAUTHORIZED"
  | "VALIDATION_FAILED"
  | "CONFLICT"
  // observability
  | "METRICS_NOT_READY"
  | "INTERNAL_ERROR"
  // batch, files, idempotency
  | "INVALID_BATCH_LINE"
  | "BATCH_NOT_CANCELLABLE"
  | "IDEMPOTENCY_KEY_IN_USE"
  | "IDEMPOTENCY_KEY_REUSED"
  // storage of files and batches
  | "STORAGE_FULL"
  | "STORAGE_QUOTA_EXCEEDED"
  | "UPLOAD_BUDGET_EXHAUSTED"
  | "JOBS_UNAVAILABLE"
  // shared state across gateways
  | "STATE_UNAVAILABLE"
  | "STALE_FENCING_TOKEN"
  // the admin listener's door (src/admin/request-guard.ts)
  | "HOST_NOT_ALLOWED"
  | "CROSS_ORIGIN_REFUSED"
  | "UNSUPPORTED_MEDIA_TYPE"
  // a node name bound to another agent (src/control/node-binding.ts)
  | "NODE_NAME_BOUND";

/** OpenAI's error `type` strings. */
type OpenAIErrorType = "invalid_request_error" | "authentication_error" | "rate_limit_error" | "server_error" | "timeout_error" | "service_unavailable_error";

interface OpenAIErrorBody {
  error: { message: string; type: OpenAIErrorType; param: string | null; code: string };
}

/** HTTP status and OpenAI error type for each code: the one switch. */
export function describeCode(code: ErrorCode): { status: number; type: OpenAIErrorType } {
  switch (code) {
    case "INVALID_JSON":
    case "INVALID_REQUEST":
    case "CONTEXT_LENGTH_EXCEEDED":
    case "UPSTREAM_REJECTED":
    case "VALIDATION_FAILED":
    case "INVALID_BATCH_LINE":
    // A follow-up whose previous_response_id is not (or no longer) stored for the tenant: OpenAI's 400 previous_response_not_found.
    case "PREVIOUS_RESPONSE_NOT_FOUND":
      return { status: 400, type: "invalid_request_error" };
    case "INVALID_API_KEY":
    case "UNAUTHORIZED":
      return { status: 401, type: "authentication_error" };
    case "MODEL_NOT_FOUND":
    case "NOT_FOUND":
    // No endpoint of the model serves the route (configured, or learned from the engines' own 404s).
    case "ROUTE_NOT_SERVED":
      return { status: 404, type: "invalid_request_error" };
    case "METHOD_NOT_ALLOWED":
      return { status: 405, type: "invalid_request_error" };
    // A state-changing admin request from a page of another origin (Origin, Sec-Fetch-Site).
    case "CROSS_ORIGIN_REFUSED":
      return { status: 403, type: "invalid_request_error" };
    case "BODY_READ_TIMEOUT":
      return { status: 408, type: "timeout_error" };
    case "BODY_TOO_LARGE":
      return { status: 413, type: "invalid_request_error" };
    // 409: the resource's state forbids it (a finished batch; a key whose first request still runs).
    case "BATCH_NOT_CANCELLABLE":
    case "IDEMPOTENCY_KEY_IN_USE":
    case "CONFLICT":
    // An agent call from a reconciler whose lease a newer leader has taken (its fencing token is lower than one already seen).
    case "STALE_FENCING_TOKEN":
    // A registration under a node name another agent holds, without that agent's node credential.
    case "NODE_NAME_BOUND":
      return { status: 409, type: "invalid_request_error" };
    // RFC 9110 15.5.16: a body in a media type the route does not take (the admin listener takes JSON only).
    case "UNSUPPORTED_MEDIA_TYPE":
      return { status: 415, type: "invalid_request_error" };
    // RFC 9110 15.5.20: the request was directed at a host this listener does not answer for (DNS rebinding).
    case "HOST_NOT_ALLOWED":
      return { status: 421, type: "invalid_request_error" };
    // 422: the request is well-formed but its key was used with another body (IETF draft-ietf-httpapi-idempotency-key-header, "Error Scenarios"; it gives 409 for a retry while the first runs).
    case "IDEMPOTENCY_KEY_REUSED":
      return { status: 422, type: "invalid_request_error" };
    case "RATE_LIMITED":
    case "GPU_SATURATED":
    case "UPSTREAM_RATE_LIMITED":
    case "ENGINE_OVERLOADED":
      return { status: 429, type: "rate_limit_error" };
    // A live API key asked for a model outside its allow-list (OpenAI answers 403 for a model a key may not use).
    case "MODEL_NOT_ALLOWED":
      return { status: 403, type: "invalid_request_error" };
    // A tenant's stored bytes or files at its limit (batch.tenant_max_bytes, batch.tenant_max_files): deleting files makes room.
    case "STORAGE_QUOTA_EXCEEDED":
      return { status: 403, type: "invalid_request_error" };
    case "INTERNAL_ERROR":
    case "INJECTED_FAULT":
      return { status: 500, type: "server_error" };
    // RFC 4918 §11.5, 507 Insufficient Storage: the disk under data_dir is full; reads and deletes still work.
    case "STORAGE_FULL":
      return { status: 507, type: "server_error" };
    case "UPSTREAM_CONNECT_FAILED":
    case "UPSTREAM_ERROR":
    case "UPSTREAM_STREAM_TRUNCATED":
    case "UPSTREAM_MALFORMED":
    case "UPSTREAM_RESPONSE_TOO_LARGE":
    // The engine refused the gateway's own key (endpoints[].api_key_env / api_key_file): a gateway fault, not the client's.
    case "UPSTREAM_UNAUTHORIZED":
      return { status: 502, type: "server_error" };
    case "NO_READY_ENDPOINT":
    case "ADMISSION_QUEUE_FULL":
    case "RETRY_BUDGET_EXHAUSTED":
    case "ENGINE_DEAD":
    case "METRICS_NOT_READY":
    // The shared store (Redis) cannot be reached: what needs it is refused, the rest is served (fail static).
    case "STATE_UNAVAILABLE":
    // Uploads hold more bytes in memory than the gateway allows (batch.upload_memory_bytes): retry shortly.
    case "UPLOAD_BUDGET_EXHAUSTED":
    // The batch store cannot be opened or read (a corrupt database): files, batches and idempotency keys are off, inference is served.
    case "JOBS_UNAVAILABLE":
      return { status: 503, type: "service_unavailable_error" };
    case "ADMISSION_TTL_EXPIRED":
    case "UPSTREAM_HEADERS_TIMEOUT":
    case "UPSTREAM_FIRST_TOKEN_TIMEOUT":
    case "UPSTREAM_IDLE_TIMEOUT":
    case "UPSTREAM_TOTAL_TIMEOUT":
      return { status: 504, type: "timeout_error" };
    default: {
      const unreachable: never = code;
      throw new Error(`unmapped error code ${String(unreachable)}`);
    }
  }
}

export class LlmgwError extends Error {
  readonly code: ErrorCode;
  readonly param: string | null;
  /** Seconds, sent as Retry-After where set. */
  readonly retryAfterS: number | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(code: ErrorCode, message: string, opts: { param?: string | null; retryAfterS?: number; headers?: Record<string, string>; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "LlmgwError";
    this.code = code;
    this.param = opts.param ?? null;
    this.retryAfterS = opts.retryAfterS;
    this.headers = opts.headers;
  }

  get status(): number {
    return describeCode(this.code).status;
  }

  toBody(): OpenAIErrorBody {
    return errorBody(this.code, this.message, this.param);
  }
}

export function errorBody(code: ErrorCode, message: string, param: string | null = null): OpenAIErrorBody {
  return { error: { message, type: describeCode(code).type, param, code } };
}

/** An OpenAI-shaped JSON error response. */
export function errorResponse(err: LlmgwError, extraHeaders: Record<string, string> = {}): Response {
  const headers: Record<string, string> = { "content-type": "application/json", ...err.headers, ...extraHeaders };
  if (err.retryAfterS !== undefined) headers["retry-after"] = String(Math.max(1, Math.ceil(err.retryAfterS)));
  return new Response(JSON.stringify(err.toBody()), { status: err.status, headers });
}

/** The message of an OpenAI-shaped error body someone sent us, or the start of the text when it is not one. */
export function errorBodyMessage(text: string, maxChars = 300): string {
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown } };
    if (typeof body.error?.message === "string") return body.error.message;
  } catch {
    // not JSON: the text itself says what happened
  }
  return text.slice(0, maxChars) || "(empty body)";
}

/** Narrow anything thrown to an LlmgwError (unknown failures become INTERNAL_ERROR). */
export function asLlmgwError(err: unknown): LlmgwError {
  if (err instanceof LlmgwError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new LlmgwError("INTERNAL_ERROR", message, { cause: err });
}
