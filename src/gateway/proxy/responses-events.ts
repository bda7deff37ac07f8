/**
 * The Responses API's event stream as the relay reads it (OpenAI's
 * "Streaming events" reference; vLLM's serving_responses.py writes the same):
 * every event is `event: <type>` then `data: <json>`, there is no [DONE],
 * and the stream ends with `response.completed` (or `response.incomplete`,
 * max_output_tokens reached) carrying the final response and its usage —
 * or with `response.failed` / `error`. Classification reads the type from
 * the event line's bytes, so no event is parsed but the rare ones the
 * gateway must read (the first response.created, the final event, an
 * error). Pure.
 */

import type { Route } from "../../metrics/names.ts";
import { bytesAt, nativeIndexOf } from "../../shared/bytes.ts";
import type { Usage } from "../request/exchange.ts";
import { classifyMessagesEvent } from "./messages-events.ts";
import { classifyNamedEvent, typeIs, typeSpan } from "./named-events.ts";
import { classifyEvent, type EventClassifier, type SseEventKind } from "./sse-scanner.ts";

const enc = new TextEncoder();
const _decoder = new TextDecoder();
const _EVENT = enc.encode("event:");
const _DATA_LINE = enc.encode("\ndata:");
const DELTA = enc.encode(".delta");
const T_COMPLETED = enc.encode("response.completed");
const T_INCOMPLETE = enc.encode("response.incomplete");
const T_FAILED = enc.encode("response.failed");
const T_ERROR = enc.encode("error");
const T_ITEM_ADDED = enc.encode("response.output_item.added");
const T_CREATED = enc.encode("response.created");
const FUNCTION_CALL_ITEM = enc.encode('"type":"function_call"');

function kindOfType(type: string): SseEventKind {
  if (type === "response.completed" || type === "response.incomplete") return "final";
  if (type === "response.failed" || type === "error") return "error";
  return type.endsWith(".delta") ? "data" : "meta";
}

/**
 * Classify one Responses event: a delta (`response.output_text.delta`,
 * `response.function_call_arguments.delta` …) is "data", a token on its way;
 * the final event is "final"; `response.failed` and `error` are "error";
 * every other event (created, in_progress, output_item.added, … .done) is
 * "meta". An event with no `event:` line is read by its JSON's `type`, or
 * as chat's would be ([DONE], an error object).
 */
export function classifyResponsesEvent(buf: Uint8Array, start: number, end: number): SseEventKind {
  return classifyNamedEvent(buf, start, end, kindOfName, kindOfType);
}

function kindOfName(buf: Uint8Array, span: readonly [number, number]): SseEventKind {
  const [ts, te] = span;
  if (te - ts > DELTA.length && bytesAt(buf, te - DELTA.length, DELTA)) return "data";
  if (typeIs(buf, span, T_COMPLETED) || typeIs(buf, span, T_INCOMPLETE)) return "final";
  if (typeIs(buf, span, T_FAILED) || typeIs(buf, span, T_ERROR)) return "error";
  return "meta";
}

/** Whether a meta event opens a function_call output item (a tool call the model started). */
export function startsToolCall(buf: Uint8Array, start: number, end: number): boolean {
  const span = typeSpan(buf, start, end);
  if (span === undefined || !typeIs(buf, span, T_ITEM_ADDED)) return false;
  const at = nativeIndexOf.call(buf, FUNCTION_CALL_ITEM, span[1]);
  return at >= 0 && at < end;
}

/** Whether a meta event is `response.created`. */
export function isCreatedEvent(buf: Uint8Array, start: number, end: number): boolean {
  const span = typeSpan(buf, start, end);
  return span !== undefined && typeIs(buf, span, T_CREATED);
}

/** The usage of a final event's response (`input_tokens`, `output_tokens`), as the gateway counts it. */
export function responsesUsage(json: Record<string, unknown> | undefined): Usage | undefined {
  const response = json?.response;
  const usage = typeof response === "object" && response !== null ? (response as Record<string, unknown>).usage : undefined;
  if (typeof usage !== "object" || usage === null) return undefined;
  const u = usage as Record<string, unknown>;
  if (typeof u.input_tokens !== "number") return undefined;
  return { prompt_tokens: u.input_tokens, completion_tokens: typeof u.output_tokens === "number" ? u.output_tokens : 0 };
}

/** One Responses event's bytes. */
export function responsesEvent(type: string, body: Record<string, unknown>): Uint8Array {
  return enc.encode(`event: ${type}\ndata: ${JSON.stringify({ ...body, type })}\n\n`);
}

/** The classifier of a route's stream (stateless: the upstream opener reads the first events with it). */
export function classifierFor(route: Route | undefined): EventClassifier {
  return route === "responses" ? classifyResponsesEvent : route === "messages" ? classifyMessagesEvent : classifyEvent;
}
