/**
 * What differs between the event streams the relay carries, one dialect per
 * API: how events are classified (the scanner's classifier), the bytes that
 * end a stream broken after its first byte (chat and completions: an error
 * chunk then [DONE]; the Responses API: its `error` event then
 * `response.failed`, never a [DONE] it does not know; Anthropic's Messages
 * API: its `error` event), and what the rare
 * non-token events tell (a Responses tool call starting, the final usage).
 * The relay asks its dialect at those points only; chat's is one shared
 * object that keeps no state, so a chat stream pays nothing for the others.
 */
import type { Route } from "../../metrics/names.ts";
import { anthropicErrorBody } from "../../shared/anthropic-errors.ts";
import { nativeIndexOf } from "../../shared/bytes.ts";
import { describeCode, type ErrorCode, errorBody } from "../../shared/errors.ts";
import type { Usage } from "../request/exchange.ts";
import { classifyMessagesEvent, mergeMessagesUsage, messagesEvent, messagesMeta } from "./messages-events.ts";
import { namedEventJson } from "./named-events.ts";
import { DONE_EVENT, sseErrorEvent } from "./relay-contracts.ts";
import { classifyResponsesEvent, isCreatedEvent, responsesEvent, responsesUsage, startsToolCall } from "./responses-events.ts";
import { classifyEvent, type EventClassifier } from "./sse-scanner.ts";

export interface StreamDialect {
  /** How this stream's events are classified. */
  readonly classify: EventClassifier;
  /** The bytes that end a stream broken after its first byte; `forwarded`: events the client has had. */
  brokenEnd(code: ErrorCode, message: string, forwarded: number): Uint8Array[];
  /** A "meta" event went to the client: the tool calls it started (0 or 1). */
  meta(buf: Uint8Array, start: number, end: number): number;
  /** The usage a "final" event reports. */
  finalUsage(event: Uint8Array): Usage | undefined;
}

const CHAT: StreamDialect = Object.freeze({
  classify: classifyEvent,
  brokenEnd: (code: ErrorCode, message: string) => [sseErrorEvent(code, message), DONE_EVENT],
  meta: () => 0,
  finalUsage: () => undefined,
});

/**
 * The Responses API's stream. It reads the first `response.created` (once)
 * so that a broken stream's `response.failed` names the same response, and
 * counts the events that went out so its own events carry the next
 * sequence numbers.
 */
class ResponsesDialect implements StreamDialect {
  readonly classify = classifyResponsesEvent;
  private created: Record<string, unknown> | undefined;
  private metas = 0;

  meta(buf: Uint8Array, start: number, end: number): number {
    this.metas++;
    if (this.created === undefined && isCreatedEvent(buf, start, end)) {
      const r = namedEventJson(buf.subarray(start, end))?.response;
      if (typeof r === "object" && r !== null) this.created = r as Record<string, unknown>;
    }
    return startsToolCall(buf, start, end) ? 1 : 0;
  }

  finalUsage(event: Uint8Array): Usage | undefined {
    return responsesUsage(namedEventJson(event));
  }

  brokenEnd(code: ErrorCode, message: string, forwarded: number): Uint8Array[] {
    const seq = forwarded + this.metas;
    const { error } = errorBody(code, message);
    const response = { ...(this.created ?? { object: "response", output: [] }), status: "failed", error: { code, message }, usage: null };
    return [
      responsesEvent("error", { code, message, param: error.param, sequence_number: seq }),
      responsesEvent("response.failed", { response, sequence_number: seq + 1 }),
    ];
  }
}

/**
 * Anthropic's Messages API stream. Its usage comes in two meta events
 * (message_start's input_tokens, message_delta's output_tokens), read as
 * they pass and reported at message_stop; a broken stream ends with the
 * API's `error` event, typed as Anthropic types the code's HTTP status.
 */
class MessagesDialect implements StreamDialect {
  readonly classify = classifyMessagesEvent;
  private usage: Usage | undefined;

  meta(buf: Uint8Array, start: number, end: number): number {
    const m = messagesMeta(buf, start, end);
    if (m.usage !== undefined) this.usage = mergeMessagesUsage(this.usage, m.usage);
    return m.toolUse ? 1 : 0;
  }

  finalUsage(): Usage | undefined {
    return this.usage;
  }

  brokenEnd(code: ErrorCode, message: string): Uint8Array[] {
    const { error } = anthropicErrorBody(describeCode(code).status, message);
    return [messagesEvent("error", { error })];
  }
}

/** The dialect of one stream of `route` (a fresh one where it keeps state). */
export function dialectFor(route: Route | undefined): StreamDialect {
  return route === "responses" ? new ResponsesDialect() : route === "messages" ? new MessagesDialect() : CHAT;
}

const TYPE_FUNCTION = new TextEncoder().encode('"type":"function"');
const TOOL_CALLS = new TextEncoder().encode('"tool_calls"');
const ID_STRING = new TextEncoder().encode('"id":"');

/**
 * Tool calls a chat chunk starts: each call's first delta carries its id (a
 * string; later deltas carry arguments only, or "id":null as SGLang sends),
 * in vLLM's, SGLang's and OpenAI's streams. The chunk's own id comes before
 * its tool_calls, and a JSON string cannot hold the pattern unescaped. Read
 * only for requests that offered tools.
 */
export function chatToolCallStarts(buf: Uint8Array, start: number, end: number): number {
  const calls = nativeIndexOf.call(buf, TOOL_CALLS, start);
  if (calls < 0 || calls >= end) return 0;
  let n = 0;
  for (let at = nativeIndexOf.call(buf, ID_STRING, calls); at >= 0 && at < end; at = nativeIndexOf.call(buf, ID_STRING, at + ID_STRING.length)) n++;
  return n;
}

const TYPE_FUNCTION_CALL = new TextEncoder().encode('"type":"function_call"');
const TYPE_TOOL_USE = new TextEncoder().encode('"type":"tool_use"');

/** Tool calls in a whole (non-streaming) answer: chat's message.tool_calls, the Responses API's function_call output items, a message's tool_use blocks. */
export function answerToolCalls(body: Uint8Array, route: Route): number {
  const pattern = route === "responses" ? TYPE_FUNCTION_CALL : route === "messages" ? TYPE_TOOL_USE : TYPE_FUNCTION;
  let n = 0;
  for (let at = nativeIndexOf.call(body, pattern, 0); at >= 0; at = nativeIndexOf.call(body, pattern, at + pattern.length)) n++;
  return n;
}
