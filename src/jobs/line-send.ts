/** The runner's view of sending one batch line: the injected send's types, and how its answer is read (wait, usage). */
import type { BatchEndpoint, WaitReason } from "./job-types.ts";

export interface BatchLineRequest {
  method: "POST";
  url: BatchEndpoint;
  body: unknown;
}

export interface SendMeta {
  tenant: string;
  batchId: string;
  customId: string;
  lineNo: number;
}

export interface SendResult {
  status: number;
  /** The parsed JSON answer (an OpenAI error object for a refusal). */
  body: unknown;
  /** x-request-id of the answer, when there is one. */
  requestId?: string;
  /** Retry-After of a 429/503, in seconds. */
  retryAfterS?: number;
}

/** The gateway's request path for one line; `signal` aborts it (expiry, shutdown). */
export type SendLine = (line: BatchLineRequest, signal: AbortSignal, meta: SendMeta) => Promise<SendResult>;

/** Error codes of llmgw refusals that mean "not now", with the reason a batch shows while its lines wait. */
export function waitReasonOf(res: SendResult): WaitReason | undefined {
  const code = errorCodeOf(res.body);
  if (res.status === 429) return code === "GPU_SATURATED" ? "gpu_saturated" : "rate_limited";
  if (res.status === 503 && code === "ADMISSION_QUEUE_FULL") return "queue_full";
  return undefined;
}

function errorCodeOf(body: unknown): string | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const error = (body as Record<string, unknown>).error;
  if (typeof error !== "object" || error === null) return undefined;
  const code = (error as Record<string, unknown>).code;
  return typeof code === "string" ? code : undefined;
}

export function usageOf(body: unknown): { prompt: number; completion: number } {
  const usage = typeof body === "object" && body !== null ? (body as Record<string, unknown>).usage : undefined;
  if (typeof usage !== "object" || usage === null) return { prompt: 0, completion: 0 };
  const u = usage as Record<string, unknown>;
  const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  return { prompt: n(u.prompt_tokens), completion: n(u.completion_tokens) };
}
