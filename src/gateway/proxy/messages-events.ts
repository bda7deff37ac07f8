/**
 * Anthropic's Messages API event stream as the relay reads it (Anthropic's
 * "Streaming messages" reference; vLLM's anthropic/serving.py writes the
 * same): every event is `event: <type>` then `data: <json>`, there is no
 * [DONE], `content_block_delta` carries the tokens, `message_start` the
 * prompt's `input_tokens`, `message_delta` the stop reason and the
 * `output_tokens`, and `message_stop` ends the stream — or `error` does.
 * Classification reads the type from the event line's bytes; JSON is parsed
 * only for the two events that carry usage. Pure.
 */
import { nativeIndexOf } from "../../shared/bytes.ts";
import type { Usage } from "../request/exchange.ts";
import { classifyNamedEvent, namedEventJson, typeIs, typeSpan } from "./named-events.ts";
import type { SseEventKind } from "./sse-scanner.ts";

const enc = new TextEncoder();
const _EVENT = enc.encode("event:");
const _DATA_LINE = enc.encode("\ndata:");
const T_DELTA = enc.encode("content_block_delta");
const T_STOP = enc.encode("message_stop");
const T_ERROR = enc.encode("error");
const T_START = enc.encode("message_start");
const T_MESSAGE_DELTA = enc.encode("message_delta");
const T_BLOCK_START = enc.encode("content_block_start");
const TOOL_USE = enc.encode('"type":"tool_use"');

const _decoder = new TextDecoder();

function kindOfType(type: string): SseEventKind {
  if (type === "content_block_delta") return "data";
  if (type === "message_stop") return "final";
  return type === "error" ? "error" : "meta";
}

/**
 * Classify one Messages event: `content_block_delta` is "data" (a token on
 * its way), `message_stop` "final", `error` "error", every other event
 * (message_start, content_block_start/stop, message_delta, ping) "meta". An
 * event without an `event:` line is read by its JSON's `type`.
 */
export function classifyMessagesEvent(buf: Uint8Array, start: number, end: number): SseEventKind {
  return classifyNamedEvent(buf, start, end, kindOfName, kindOfType);
}

function kindOfName(buf: Uint8Array, span: readonly [number, number]): SseEventKind {
  if (typeIs(buf, span, T_DELTA)) return "data";
  if (typeIs(buf, span, T_STOP)) return "final";
  return typeIs(buf, span, T_ERROR) ? "error" : "meta";
}

/** What a meta event tells: the usage it carries (message_start, message_delta), and whether it opens a tool_use block. */
export function messagesMeta(buf: Uint8Array, start: number, end: number): { usage?: Record<string, unknown>; toolUse: boolean } {
  const span = typeSpan(buf, start, end);
  if (span === undefined) return { toolUse: false };
  if (typeIs(buf, span, T_BLOCK_START)) {
    const at = nativeIndexOf.call(buf, TOOL_USE, span[1]);
    return { toolUse: at >= 0 && at < end };
  }
  const isStart = typeIs(buf, span, T_START);
  if (!isStart && !typeIs(buf, span, T_MESSAGE_DELTA)) return { toolUse: false };
  const json = namedEventJson(buf.subarray(start, end));
  const holder = isStart ? json?.message : json;
  const usage = typeof holder === "object" && holder !== null ? (holder as Record<string, unknown>).usage : undefined;
  return typeof usage === "object" && usage !== null ? { usage: usage as Record<string, unknown>, toolUse: false } : { toolUse: false };
}

/** The usage a stream reported so far, as the gateway counts it: the latest input_tokens and output_tokens (undefined before any). */
export function mergeMessagesUsage(into: Usage | undefined, u: Record<string, unknown>): Usage | undefined {
  const input = typeof u.input_tokens === "number" ? u.input_tokens : into?.prompt_tokens;
  const output = typeof u.output_tokens === "number" ? u.output_tokens : into?.completion_tokens;
  if (input === undefined && output === undefined) return into;
  return { prompt_tokens: input ?? 0, completion_tokens: output ?? 0 };
}

/** One Messages event's bytes. */
export function messagesEvent(type: string, body: Record<string, unknown>): Uint8Array {
  return enc.encode(`event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`);
}
