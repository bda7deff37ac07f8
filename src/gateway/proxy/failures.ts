/**
 * What each upstream failure means, in one place: the error code the client
 * sees, whether it counts against the endpoint's health (the circuit
 * breaker's input), and how an engine's own error answer is read and passed
 * on.
 */
import type { AttemptFailure } from "../../metrics/names.ts";
import type { ErrorCode } from "../../shared/errors.ts";

export const FAILURE_CODE: Record<AttemptFailure, ErrorCode> = {
  connect: "UPSTREAM_CONNECT_FAILED",
  headers_timeout: "UPSTREAM_HEADERS_TIMEOUT",
  first_token_timeout: "UPSTREAM_FIRST_TOKEN_TIMEOUT",
  idle_timeout: "UPSTREAM_IDLE_TIMEOUT",
  total_timeout: "UPSTREAM_TOTAL_TIMEOUT",
  status_5xx: "UPSTREAM_ERROR",
  status_429: "UPSTREAM_RATE_LIMITED",
  status_4xx: "UPSTREAM_REJECTED",
  malformed: "UPSTREAM_MALFORMED",
  too_large: "UPSTREAM_RESPONSE_TOO_LARGE",
  truncated: "UPSTREAM_STREAM_TRUNCATED",
};

/** Failures that say something about the endpoint's health (the circuit breaker counts these). */
export const ENDPOINT_FAULTS: ReadonlySet<AttemptFailure> = new Set<AttemptFailure>([
  "connect",
  "headers_timeout",
  "first_token_timeout",
  "status_5xx",
  "truncated",
  "malformed",
  "idle_timeout",
  "total_timeout",
]);

const CONTEXT_LENGTH_RE = /context length|max_model_len|maximum model length|too long|context window/i;

/** The message and param of an engine's error body (OpenAI's shape, or whatever text it sent). */
export function engineError(body: Uint8Array | undefined): { message: string; param: string | null } {
  if (!body) return { message: "engine rejected the request", param: null };
  const text = new TextDecoder().decode(body);
  try {
    const json = JSON.parse(text) as { error?: { message?: unknown; param?: unknown }; message?: unknown };
    const message = json.error?.message ?? json.message;
    const param = json.error?.param;
    return { message: typeof message === "string" ? message : text.slice(0, 500), param: typeof param === "string" ? param : null };
  } catch {
    return { message: text.slice(0, 500) || "engine rejected the request", param: null };
  }
}

export function isContextLengthError(message: string): boolean {
  return CONTEXT_LENGTH_RE.test(message);
}

/** An engine's 4xx, passed to the client with the engine's status and message in our error shape. */
export function rejectedResponse(status: number, body: Uint8Array | undefined, headers: Record<string, string>): Response {
  const { message, param } = engineError(body);
  const code: ErrorCode = isContextLengthError(message) ? "CONTEXT_LENGTH_EXCEEDED" : "UPSTREAM_REJECTED";
  const json = { error: { message, type: "invalid_request_error", param, code } };
  return new Response(JSON.stringify(json), { status, headers: { "content-type": "application/json", ...headers } });
}
