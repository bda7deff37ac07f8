/**
 * Relays an open upstream SSE stream to the client, event for event, with
 * backpressure (a pull-based stream: the upstream is read only when the
 * client has taken the previous bytes). Observes only what it must: token
 * events for timing, the usage chunk (passed on only if the client asked for
 * it), [DONE]. A broken stream never looks finished: a cut connection, a
 * deadline or an engine error becomes an explicit SSE error event then
 * [DONE]. A client that leaves cancels the upstream request at once.
 */
import type { AttemptFailure } from "../../metrics/names.ts";
import { errorBody, type ErrorCode } from "../../shared/errors.ts";
import { eventJson, MAX_EVENT_BYTES, type ScannedEvent } from "./sse-scanner.ts";
import type { OpenStream } from "./upstream.ts";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
}

export type RelayEnd =
  | { outcome: "ok" }
  | { outcome: "cancelled" }
  | { outcome: "stream_error" | "timeout"; failure: AttemptFailure; message: string };

export interface RelayHooks {
  /** Whether the client asked for stream_options.include_usage. */
  includeUsage: boolean;
  /** A token event went to the client. */
  onEvent(): void;
  onUsage(usage: Usage): void;
  onMalformed(): void;
  /** Called exactly once, when the relay is over for whatever reason. */
  onEnd(end: RelayEnd): void;
}

/** How long an engine may keep a stream open after [DONE] before we cancel it. */
const DRAIN_AFTER_DONE_MS = 2_000;

const enc = new TextEncoder();
const DONE_EVENT = enc.encode("data: [DONE]\n\n");

export function sseErrorEvent(code: ErrorCode, message: string): Uint8Array {
  return enc.encode(`data: ${JSON.stringify(errorBody(code, message))}\n\n`);
}

function readUsage(event: ScannedEvent): Usage | undefined {
  const json = eventJson(event.bytes);
  if (typeof json !== "object" || json === null) return undefined;
  const usage = (json as { usage?: unknown }).usage;
  if (typeof usage !== "object" || usage === null) return undefined;
  const u = usage as Record<string, unknown>;
  const prompt = typeof u.prompt_tokens === "number" ? u.prompt_tokens : 0;
  const completion = typeof u.completion_tokens === "number" ? u.completion_tokens : 0;
  return { prompt_tokens: prompt, completion_tokens: completion };
}

function engineErrorMessage(event: ScannedEvent): string {
  const json = eventJson(event.bytes);
  const msg = (json as { error?: { message?: unknown } } | undefined)?.error?.message;
  return typeof msg === "string" ? msg : "engine reported an error mid-stream";
}

export function relayStream(open: OpenStream, hooks: RelayHooks): ReadableStream<Uint8Array> {
  const { reader, scanner, deadlines } = open;
  let ended = false;
  let sawDone = false;
  let pendingFirst: ScannedEvent[] | undefined = open.firstEvents;
  for (let i = 0; i < open.malformedDropped; i++) hooks.onMalformed();

  const end = (e: RelayEnd) => {
    if (ended) return;
    ended = true;
    deadlines.dispose();
    hooks.onEnd(e);
  };

  /** Enqueued chunks so far: pull() must not return before it enqueued something (see below). */
  let enqueued = 0;
  const send = (controller: ReadableStreamDefaultController<Uint8Array>, bytes: Uint8Array) => {
    controller.enqueue(bytes);
    enqueued++;
  };

  /** Enqueue what the client should see of these events; true once the stream is finished. */
  const deliver = (controller: ReadableStreamDefaultController<Uint8Array>, events: ScannedEvent[]): boolean => {
    for (const e of events) {
      switch (e.kind) {
        case "data":
          send(controller, e.bytes);
          hooks.onEvent();
          break;
        case "usage": {
          const usage = readUsage(e);
          if (usage) hooks.onUsage(usage);
          if (hooks.includeUsage) send(controller, e.bytes);
          break;
        }
        case "comment":
          send(controller, e.bytes);
          break;
        case "malformed":
          hooks.onMalformed();
          break;
        case "error":
          send(controller, sseErrorEvent("UPSTREAM_ERROR", engineErrorMessage(e)));
          send(controller, DONE_EVENT);
          controller.close();
          end({ outcome: "stream_error", failure: "status_5xx", message: engineErrorMessage(e) });
          return true;
        case "done":
          sawDone = true;
          send(controller, DONE_EVENT);
          controller.close();
          end({ outcome: "ok" });
          return true;
      }
    }
    return false;
  };

  const finishBroken = (controller: ReadableStreamDefaultController<Uint8Array>, code: ErrorCode, failure: AttemptFailure, message: string) => {
    send(controller, sseErrorEvent(code, message));
    send(controller, DONE_EVENT);
    controller.close();
    end({ outcome: failure === "idle_timeout" || failure === "total_timeout" ? "timeout" : "stream_error", failure, message });
  };

  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        // A pull that enqueues nothing is not called again (WHATWG streams:
        // the pending read does not re-trigger it), so keep reading until
        // something went to the client — a chunk may hold only a usage event
        // we drop, a malformed event, or half an event.
        const mark = enqueued;
        if (pendingFirst) {
          const first = pendingFirst;
          pendingFirst = undefined;
          if (deliver(controller, first)) return releaseUpstream();
        }
        while (enqueued === mark && !ended) {
          let chunk: Awaited<ReturnType<typeof reader.read>>;
          try {
            chunk = await reader.read();
          } catch {
            if (ended) return;
            if (deadlines.fired === "idle_timeout") {
              return finishBroken(controller, "UPSTREAM_IDLE_TIMEOUT", "idle_timeout", "the engine sent nothing within the inter-token deadline");
            }
            if (deadlines.fired === "total_timeout") {
              return finishBroken(controller, "UPSTREAM_TOTAL_TIMEOUT", "total_timeout", "the request exceeded its total deadline");
            }
            return finishBroken(controller, "UPSTREAM_STREAM_TRUNCATED", "truncated", "the engine connection broke mid-stream");
          }
          if (chunk.done) {
            if (!sawDone) finishBroken(controller, "UPSTREAM_STREAM_TRUNCATED", "truncated", "the engine ended the stream without [DONE]");
            return;
          }
          deadlines.touch();
          // Events completed before an overflow still go out, then the error.
          if (deliver(controller, scanner.push(chunk.value))) return releaseUpstream();
          if (scanner.overflowed) {
            finishBroken(controller, "UPSTREAM_MALFORMED", "malformed", `the engine sent an SSE event over ${MAX_EVENT_BYTES} bytes`);
            return releaseUpstream();
          }
        }
      },
      cancel() {
        deadlines.abort("client went away");
        void reader.cancel().catch(() => {});
        end({ outcome: "cancelled" });
      },
    },
    // One chunk of look-ahead: read the next upstream chunk only after the
    // client took the previous one.
    { highWaterMark: 1 },
  );

  /**
   * After [DONE], let the upstream body end on its own (so the connection can
   * be reused) but never wait on it for long; after an engine error, cancel it
   * so the engine stops generating for a client that already has its error.
   */
  function releaseUpstream(): void {
    if (!sawDone) {
      deadlines.abort("stream finished with an error");
      void reader.cancel().catch(() => {});
      return;
    }
    const timer = setTimeout(() => {
      deadlines.abort("engine kept the stream open after [DONE]");
      void reader.cancel().catch(() => {});
    }, DRAIN_AFTER_DONE_MS);
    void (async () => {
      try {
        for (;;) {
          const { done } = await reader.read();
          if (done) break;
        }
      } catch {
        // the engine closed abruptly after [DONE]: nothing left to deliver
      } finally {
        clearTimeout(timer);
      }
    })();
  }
}
