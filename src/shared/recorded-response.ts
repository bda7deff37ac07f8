/**
 * Record a response while it is relayed (status, headers, body bytes — for a
 * stream, every event as sent) and replay it later byte for byte. Used by
 * idempotent replay and the response cache: only a complete 2xx answer is
 * ever recorded, and a client that leaves mid-stream records nothing.
 */
import { logger } from "./logger.ts";

export interface RecordedResponse {
  status: number;
  headers: [string, string][];
  body: Uint8Array;
}

interface RecordOptions {
  /** Larger answers are relayed but not recorded. */
  maxBytes: number;
  /** The answer was relayed whole and is worth keeping. */
  onComplete: (recorded: RecordedResponse) => void | Promise<void>;
  /** Not recorded: not 2xx, too large, broken, cancelled, or an SSE stream that ended in an error event. */
  onAbandon: () => void | Promise<void>;
}

/** Headers about one transfer or one moment (hop-by-hop, length, date, quota state, cache/replay markers): never replayed. */
const TRANSIENT_HEADERS = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "date", "x-llmgw-cache", "x-llmgw-replay"]);

function recordableHeaders(headers: Headers): [string, string][] {
  const out: [string, string][] = [];
  headers.forEach((value, name) => {
    if (!TRANSIENT_HEADERS.has(name) && !name.startsWith("x-ratelimit-")) out.push([name, value]);
  });
  return out;
}

const DONE_EVENT = "data: [DONE]";
const ERROR_EVENT = 'data: {"error"';

/**
 * A relayed SSE stream is complete when it ends with `data: [DONE]` (a
 * Responses API stream: with response.completed; a Messages API stream: with message_stop) and no event is an error: llmgw ends a broken stream with an explicit error event
 * and then [DONE] (README, "Relay and deadlines"), and such a stream must not
 * be replayed as if it were the answer.
 */
export function sseEndedCleanly(body: Uint8Array): boolean {
  const text = new TextDecoder().decode(body);
  // The Responses API's stream has no [DONE]: it is whole when its last event is response.completed (or .incomplete).
  const last = text.trimEnd().lastIndexOf("\n\n");
  const lastEvent = text.slice(last < 0 ? 0 : last + 2);
  if (lastEvent.startsWith("event: response.completed\n") || lastEvent.startsWith("event: response.incomplete\n"))
    return !/\nevent: (error|response\.failed)\n/.test(`\n${text}`);
  // Anthropic's Messages stream: whole when it ends with message_stop.
  if (lastEvent.startsWith("event: message_stop\n")) return !/\nevent: error\n/.test(`\n${text}`);
  if (!text.trimEnd().endsWith(DONE_EVENT)) return false;
  return !text.startsWith(ERROR_EVENT) && !text.includes(`\n${ERROR_EVENT}`);
}

/** Run a storage callback off the response path; a failing store must not break the answer or the process. */
function detached(fn: () => void | Promise<void>): void {
  Promise.resolve()
    .then(fn)
    .catch((err: unknown) => logger().error({ err: err instanceof Error ? err.message : String(err) }, "recording a response failed"));
}

function isComplete(contentType: string | null, body: Uint8Array): boolean {
  return contentType?.includes("text/event-stream") ? sseEndedCleanly(body) : true;
}

/** The response to send instead of `res`: the same bytes, recorded on the way (a pull-based stream, so a client disconnect cancels upstream at once). */
export function recordResponse(res: Response, opts: RecordOptions): Response {
  if (res.status < 200 || res.status >= 300) {
    detached(opts.onAbandon);
    return res;
  }
  const headers = recordableHeaders(res.headers);
  const contentType = res.headers.get("content-type");
  if (res.body === null) {
    detached(() => opts.onComplete({ status: res.status, headers, body: new Uint8Array(0) }));
    return res;
  }
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let overflow = false;
  let settled = false;
  const settle = (complete: boolean) => {
    if (settled) return;
    settled = true;
    if (complete && !overflow) {
      const body = Buffer.concat(chunks, size);
      if (isComplete(contentType, body)) return detached(() => opts.onComplete({ status: res.status, headers, body }));
    }
    detached(opts.onAbandon);
  };
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const step = await reader.read().catch((err: unknown) => {
        settle(false);
        controller.error(err);
        return undefined;
      });
      if (step === undefined) return;
      if (step.done) {
        settle(true);
        controller.close();
        return;
      }
      if (!overflow) {
        size += step.value.byteLength;
        if (size > opts.maxBytes) {
          overflow = true;
          chunks.length = 0;
        } else chunks.push(step.value);
      }
      controller.enqueue(step.value);
    },
    cancel(reason) {
      settle(false);
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
}

/** A recorded answer as a fresh Response, with `extra` headers on top. */
export function replayResponse(rec: RecordedResponse, extra: Record<string, string> = {}): Response {
  const headers = new Headers(rec.headers);
  for (const [k, v] of Object.entries(extra)) headers.set(k, v);
  return new Response(rec.body, { status: rec.status, headers });
}
