/**
 * A chat completion's answer as an Anthropic Messages API answer, for a
 * Messages request that went to an endpoint serving chat only: the message
 * object from a whole answer, the Messages event stream from the relayed
 * chat stream, and count_tokens' answer from vLLM's /tokenize. The mapping
 * is vLLM's (vllm/entrypoints/anthropic/serving.py): content → a text block,
 * tool_calls → tool_use blocks, finish_reason stop → end_turn (stop_sequence
 * when a stop string ended it), length → max_tokens, tool_calls → tool_use.
 * Pure but for the stream's own state.
 */
import type { Usage } from "../request/exchange.ts";
import { messagesEvent } from "./messages-events.ts";

type Obj = Record<string, unknown>;

const enc = new TextEncoder();
const decoder = new TextDecoder();

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function parseObject(text: string): Obj | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return isObj(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** A chat id as a message id (msg_…, as Anthropic's are). */
function messageId(id: unknown): string {
  const s = typeof id === "string" ? id.replace(/^chatcmpl-/, "") : "";
  return `msg_${s === "" ? crypto.randomUUID().replaceAll("-", "") : s}`;
}

/** Anthropic's stop_reason (and stop_sequence) for a chat choice's finish_reason and vLLM's stop_reason. */
function stopOf(finish: unknown, stopReason: unknown, calledTools: boolean): { stop_reason: string; stop_sequence: string | null } {
  if (finish === "length") return { stop_reason: "max_tokens", stop_sequence: null };
  if (finish === "tool_calls" || calledTools) return { stop_reason: "tool_use", stop_sequence: null };
  if (typeof stopReason === "string") return { stop_reason: "stop_sequence", stop_sequence: stopReason };
  return { stop_reason: "end_turn", stop_sequence: null };
}

function toolInput(args: unknown): unknown {
  if (typeof args !== "string") return isObj(args) ? args : {};
  return parseObject(args) ?? {};
}

/** The message object for a whole chat answer; undefined when the answer is not one. */
export function chatAnswerToMessage(body: Uint8Array): Uint8Array | undefined {
  const chat = parseObject(decoder.decode(body));
  const choice = Array.isArray(chat?.choices) && isObj(chat.choices[0]) ? chat.choices[0] : undefined;
  if (chat === undefined || choice === undefined) return undefined;
  const msg = isObj(choice.message) ? choice.message : {};
  const content: Obj[] = [];
  if (typeof msg.content === "string" && msg.content !== "") content.push({ type: "text", text: msg.content });
  const calls = Array.isArray(msg.tool_calls) ? msg.tool_calls.filter(isObj) : [];
  for (const c of calls) {
    const fn = isObj(c.function) ? c.function : {};
    content.push({ type: "tool_use", id: c.id, name: fn.name, input: toolInput(fn.arguments) });
  }
  const u = isObj(chat.usage) ? chat.usage : {};
  return enc.encode(
    JSON.stringify({
      id: messageId(chat.id),
      type: "message",
      role: "assistant",
      content,
      model: chat.model,
      ...stopOf(choice.finish_reason, choice.stop_reason, calls.length > 0),
      usage: {
        input_tokens: typeof u.prompt_tokens === "number" ? u.prompt_tokens : 0,
        output_tokens: typeof u.completion_tokens === "number" ? u.completion_tokens : 0,
      },
    }),
  );
}

/** count_tokens' answer for vLLM's /tokenize answer (`count`); undefined when it is not one. */
export function tokenizeToCount(body: Uint8Array): Uint8Array | undefined {
  const count = parseObject(decoder.decode(body))?.count;
  if (typeof count !== "number") return undefined;
  return enc.encode(JSON.stringify({ input_tokens: count, context_management: { original_input_tokens: count } }));
}

/**
 * The relayed chat stream (whole events, as the relay writes them) turned
 * into the Messages event stream: message_start at the first chunk, a
 * content block per run of text or per tool call, and at [DONE]
 * message_delta (with the usage the relay settled: `usage()`) and
 * message_stop. Events the relay wrote in the Messages dialect already (a
 * broken stream's `error` event) and comments pass as they are.
 */
export function chatToMessagesStream(usage: () => Usage | undefined): TransformStream<Uint8Array, Uint8Array> {
  const dec = new TextDecoder();
  let carry = "";
  let started = false;
  /** The open block: "text", "tool_use", or none. */
  let block: string | undefined;
  let index = -1;
  let finish: unknown;
  let stopReason: unknown;
  let calledTools = false;
  let inputTokens = 0;
  const out: Uint8Array[] = [];

  const close = () => {
    if (block === undefined) return;
    out.push(messagesEvent("content_block_stop", { index }));
    block = undefined;
  };
  const open = (type: string, contentBlock: Obj) => {
    close();
    index++;
    block = type;
    out.push(messagesEvent("content_block_start", { index, content_block: contentBlock }));
  };
  const chunk = (c: Obj) => {
    if (!started) {
      started = true;
      const u = isObj(c.usage) ? c.usage : {};
      inputTokens = typeof u.prompt_tokens === "number" ? u.prompt_tokens : 0;
      const message = { id: messageId(c.id), type: "message", role: "assistant", content: [], model: c.model, stop_reason: null, stop_sequence: null };
      out.push(messagesEvent("message_start", { message: { ...message, usage: { input_tokens: inputTokens, output_tokens: 0 } } }));
      out.push(messagesEvent("ping", {}));
    }
    const choice = Array.isArray(c.choices) && isObj(c.choices[0]) ? c.choices[0] : undefined;
    if (choice === undefined) return;
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) {
      finish = choice.finish_reason;
      stopReason = choice.stop_reason;
    }
    const delta = isObj(choice.delta) ? choice.delta : {};
    if (typeof delta.content === "string" && delta.content !== "") {
      if (block !== "text") open("text", { type: "text", text: "" });
      out.push(messagesEvent("content_block_delta", { index, delta: { type: "text_delta", text: delta.content } }));
    }
    if (Array.isArray(delta.tool_calls))
      for (const t of delta.tool_calls.filter(isObj)) {
        const fn = isObj(t.function) ? t.function : {};
        if (typeof t.id === "string" && t.id !== "") {
          calledTools = true;
          open("tool_use", { type: "tool_use", id: t.id, name: fn.name ?? "", input: {} });
        }
        if (block === "tool_use" && typeof fn.arguments === "string" && fn.arguments !== "")
          out.push(messagesEvent("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: fn.arguments } }));
      }
  };
  const done = () => {
    close();
    const u = usage();
    const stop = stopOf(finish, stopReason, calledTools);
    out.push(
      messagesEvent("message_delta", { delta: stop, usage: { input_tokens: u?.prompt_tokens ?? inputTokens, output_tokens: u?.completion_tokens ?? 0 } }),
    );
    out.push(messagesEvent("message_stop", {}));
  };
  const event = (text: string, raw: string) => {
    if (!text.startsWith("data:")) {
      out.push(enc.encode(raw)); // a comment, or an event already in the Messages dialect
      return;
    }
    const payload = text.slice(5).trim();
    if (payload === "[DONE]") return done();
    const c = parseObject(payload);
    if (c !== undefined) chunk(c);
  };

  return new TransformStream<Uint8Array, Uint8Array>({
    transform(bytes, controller) {
      carry += dec.decode(bytes, { stream: true });
      for (let at = carry.indexOf("\n\n"); at >= 0; at = carry.indexOf("\n\n")) {
        const raw = carry.slice(0, at + 2);
        carry = carry.slice(at + 2);
        event(raw.trim(), raw);
      }
      if (out.length > 0) controller.enqueue(out.length === 1 ? out[0]! : Buffer.concat(out));
      out.length = 0;
    },
  });
}
