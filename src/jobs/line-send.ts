/** The runner's view of sending one batch line: the injected send's types, and how its answer is read (wait, usage). */
import type { BatchEndpoint, WaitReason } from "./job-types.ts";

interface BatchLineRequest {
  method: "POST";
  url: BatchEndpoint;
  /** The request body, JSON text as the input file held it (checked at upload): sent as it is, never parsed here. */
  body: string;
}

interface SendMeta {
  tenant: string;
  batchId: string;
  customId: string;
  lineNo: number;
}

export interface SendResult {
  status: number;
  /**
   * The answer, JSON text (an OpenAI error object for a refusal). It goes
   * into the output file as it is: a 2xx answer is not parsed or
   * re-serialised on the way (an embeddings answer is a large float array).
   */
  body: string;
  /** The answer's token usage, where the sender read it already; absent, it is read from the body. */
  usage?: LineUsage;
  /** x-request-id of the answer, when there is one. */
  requestId?: string;
  /** Retry-After of a 429/503, in seconds. */
  retryAfterS?: number;
}

/** The gateway's request path for one line; `signal` aborts it (expiry, shutdown). */
export type SendLine = (line: BatchLineRequest, signal: AbortSignal, meta: SendMeta) => Promise<SendResult>;

/**
 * What the runner does with an answer:
 * - `done`: record it (a 2xx, or a 4xx that is the request's own fault — the
 *   engine rejected it, or the gateway found it malformed);
 * - `wait`: nothing is wrong with the line, the capacity to run it is not
 *   there now (saturation, a rate limit, a full queue, no ready endpoint for
 *   the model — not yet discovered after a restart, or its engine down or
 *   unreachable). The line runs again after a backoff, as often as the
 *   batch's window allows, without spending an attempt;
 * - `retry`: the engine answered with a failure of its own (a 5xx, a broken
 *   or malformed answer, a deadline): again after a backoff, each one an
 *   attempt, up to batch.max_attempts.
 */
type LineVerdict = { kind: "done" } | { kind: "wait"; reason: WaitReason } | { kind: "retry" };

/** llmgw's own refusals that mean "not now", with the reason the batch shows while its lines wait. */
const WAIT_CODES: Readonly<Record<string, WaitReason>> = {
  GPU_SATURATED: "gpu_saturated",
  RATE_LIMITED: "rate_limited",
  UPSTREAM_RATE_LIMITED: "rate_limited",
  ENGINE_OVERLOADED: "rate_limited",
  ADMISSION_QUEUE_FULL: "queue_full",
  ADMISSION_TTL_EXPIRED: "queue_full",
  // The model was served when the batch was created: after a restart it may
  // not be discovered yet, and an endpoint that is down or restarting comes back.
  MODEL_NOT_FOUND: "no_ready_endpoint",
  NO_READY_ENDPOINT: "no_ready_endpoint",
  ENGINE_DEAD: "no_ready_endpoint",
  UPSTREAM_CONNECT_FAILED: "no_ready_endpoint",
  UPSTREAM_HEADERS_TIMEOUT: "no_ready_endpoint",
  UPSTREAM_STREAM_TRUNCATED: "no_ready_endpoint",
  RETRY_BUDGET_EXHAUSTED: "no_ready_endpoint",
  STATE_UNAVAILABLE: "no_ready_endpoint",
  METRICS_NOT_READY: "no_ready_endpoint",
};

interface LineUsage {
  prompt: number;
  completion: number;
}

export function lineVerdict(res: SendResult): LineVerdict {
  if (res.status >= 200 && res.status < 300) return { kind: "done" };
  const code = errorCodeOf(parsedOrNull(res.body));
  const reason = code === undefined ? undefined : WAIT_CODES[code];
  if (reason !== undefined) return { kind: "wait", reason };
  if (res.status === 429) return { kind: "wait", reason: "rate_limited" };
  if (res.status >= 500 || res.status === 408) return { kind: "retry" };
  return { kind: "done" };
}

function errorCodeOf(body: unknown): string | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const error = (body as Record<string, unknown>).error;
  if (typeof error !== "object" || error === null) return undefined;
  const code = (error as Record<string, unknown>).code;
  return typeof code === "string" ? code : undefined;
}

/** A JSON text parsed, or null when it is not JSON (refusals are small; a 2xx answer is only parsed when its sender gave no usage). */
function parsedOrNull(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}

/** The token usage of an answer: the sender's reading, else the body's `usage` object. */
export function usageOfResult(res: SendResult): LineUsage {
  return res.usage ?? usageOf(parsedOrNull(res.body));
}

export function usageOf(body: unknown): LineUsage {
  const usage = typeof body === "object" && body !== null ? (body as Record<string, unknown>).usage : undefined;
  if (typeof usage !== "object" || usage === null) return { prompt: 0, completion: 0 };
  const u = usage as Record<string, unknown>;
  const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  return { prompt: n(u.prompt_tokens), completion: n(u.completion_tokens) };
}
