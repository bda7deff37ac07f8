/**
 * Anthropic's Messages API in the gateway, pure parts: a Messages request as
 * a chat completion (system, blocks, tool_use → tool_calls, tool_result →
 * tool messages, tools, tool_choice, stop_sequences, a stream asking usage),
 * a chat answer and a chat stream as the Messages API's, the stream's
 * classification (TTFT at the first content_block_delta, not message_start)
 * and its usage, and Anthropic's error type by status.
 */
import { describe, expect, test } from "bun:test";
import { chatAnswerToMessage, chatToMessagesStream, tokenizeToCount } from "../../src/gateway/proxy/chat-to-messages.ts";
import { classifyMessagesEvent, mergeMessagesUsage, messagesMeta } from "../../src/gateway/proxy/messages-events.ts";
import { dialectFor } from "../../src/gateway/proxy/stream-dialect.ts";
import { countTokensToTokenize, messagesToChat } from "../../src/gateway/request/messages-to-chat.ts";
import type { InferenceBody } from "../../src/gateway/request/parse.ts";
import { anthropicErrorType } from "../../src/shared/anthropic-errors.ts";
import { sseEndedCleanly } from "../../src/shared/recorded-response.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

function chatOf(body: Record<string, unknown>): Record<string, unknown> {
  return JSON.parse(messagesToChat({ model: "m", max_tokens: 64, ...body } as InferenceBody, "m2")) as Record<string, unknown>;
}

function kind(event: string) {
  const b = enc.encode(event);
  return classifyMessagesEvent(b, 0, b.length);
}

describe("a Messages request as a chat completion", () => {
  test("system (a string or text blocks, and system-role messages) becomes one system message; the model is the one asked", () => {
    const chat = chatOf({
      system: [
        { type: "text", text: "Be " },
        { type: "text", text: "brief." },
      ],
      messages: [{ role: "user", content: "hi" }],
    });
    expect(chat.model).toBe("m2");
    expect(chat.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "hi" },
    ]);
    expect(chat.max_tokens).toBe(64);
    expect(chat.stream).toBeUndefined();
  });

  test("tool_use blocks become the assistant's tool_calls, tool_result blocks tool messages; tools and tool_choice function tools", () => {
    const chat = chatOf({
      tools: [{ name: "get_weather", description: "weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }],
      tool_choice: { type: "any" },
      stop_sequences: ["END"],
      temperature: 0.5,
      messages: [
        { role: "user", content: "weather?" },
        {
          role: "assistant",
          content: [
            { type: "text", text: "Let me look." },
            { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Oslo" } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "rain" }] },
            { type: "text", text: "And tomorrow?" },
          ],
        },
      ],
    });
    expect(chat.messages).toEqual([
      { role: "user", content: "weather?" },
      {
        role: "assistant",
        content: "Let me look.",
        tool_calls: [{ id: "toolu_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }],
      },
      { role: "tool", tool_call_id: "toolu_1", content: "rain" },
      { role: "user", content: "And tomorrow?" },
    ]);
    expect(chat.tools).toEqual([
      { type: "function", function: { name: "get_weather", description: "weather", parameters: { type: "object", properties: { city: { type: "string" } } } } },
    ]);
    expect(chat.tool_choice).toBe("required");
    expect(chat.stop).toEqual(["END"]);
    expect(chat.temperature).toBe(0.5);
    expect(chatOf({ tools: [{ name: "f", input_schema: {} }], tool_choice: { type: "tool", name: "f" }, messages: [] }).tool_choice).toEqual({
      type: "function",
      function: { name: "f" },
    });
  });

  test("a stream asks the engine for usage; count_tokens becomes a chat /tokenize request", () => {
    expect(chatOf({ stream: true, messages: [{ role: "user", content: "x" }] })).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    const tokenize = JSON.parse(countTokensToTokenize({ model: "m", system: "s", messages: [{ role: "user", content: "x" }] }, "m")) as Record<string, unknown>;
    expect(tokenize).toEqual({
      model: "m",
      messages: [
        { role: "system", content: "s" },
        { role: "user", content: "x" },
      ],
    });
  });
});

describe("a chat answer as a message", () => {
  test("content and tool_calls become blocks; finish_reason maps to stop_reason; usage to input/output tokens", () => {
    const chat = {
      id: "chatcmpl-abc",
      model: "m",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: "Sure.", tool_calls: [{ id: "call_1", type: "function", function: { name: "f", arguments: '{"a":1}' } }] },
          finish_reason: "tool_calls",
        },
      ],
      usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
    };
    const msg = JSON.parse(dec.decode(chatAnswerToMessage(enc.encode(JSON.stringify(chat)))!)) as Record<string, unknown>;
    expect(msg).toEqual({
      id: "msg_abc",
      type: "message",
      role: "assistant",
      content: [
        { type: "text", text: "Sure." },
        { type: "tool_use", id: "call_1", name: "f", input: { a: 1 } },
      ],
      model: "m",
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: { input_tokens: 7, output_tokens: 3 },
    });
    const stopped = (finish: string, stop_reason: unknown) =>
      JSON.parse(
        dec.decode(chatAnswerToMessage(enc.encode(JSON.stringify({ ...chat, choices: [{ message: { content: "x" }, finish_reason: finish, stop_reason }] })))!),
      ) as { stop_reason: string; stop_sequence: string | null };
    expect(stopped("stop", null)).toMatchObject({ stop_reason: "end_turn", stop_sequence: null });
    expect(stopped("stop", "END")).toMatchObject({ stop_reason: "stop_sequence", stop_sequence: "END" });
    expect(stopped("length", null).stop_reason).toBe("max_tokens");
    expect(chatAnswerToMessage(enc.encode('{"error":{"message":"x"}}'))).toBeUndefined();
    expect(JSON.parse(dec.decode(tokenizeToCount(enc.encode('{"count":12,"max_model_len":4096,"tokens":[]}'))!))).toEqual({
      input_tokens: 12,
      context_management: { original_input_tokens: 12 },
    });
  });
});

async function translate(events: string[], usage = { prompt_tokens: 9, completion_tokens: 2 }): Promise<{ type: string; [k: string]: unknown }[]> {
  const source = new ReadableStream<Uint8Array>({
    start(c) {
      // Split across reads, as a network would.
      const all = enc.encode(events.join(""));
      for (let i = 0; i < all.length; i += 7) c.enqueue(all.subarray(i, i + 7));
      c.close();
    },
  });
  const text = await new Response(source.pipeThrough(chatToMessagesStream(() => usage))).text();
  return text
    .split("\n\n")
    .filter((e) => e.startsWith("event:"))
    .map((e) => JSON.parse(e.slice(e.indexOf("\ndata:") + 6)) as { type: string });
}

const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-1", model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

describe("a chat stream as the Messages event stream", () => {
  test("text: message_start, one text block, its deltas, then message_delta with the settled usage and message_stop", async () => {
    const out = await translate([chunk({ role: "assistant", content: "" }), chunk({ content: "Hel" }), chunk({ content: "lo" }, "length"), "data: [DONE]\n\n"]);
    expect(out.map((e) => e.type)).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    expect(out[0]).toMatchObject({ message: { id: "msg_1", role: "assistant", model: "m", content: [] } });
    expect(out[3]).toEqual({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hel" } });
    expect(out[6]).toEqual({ type: "message_delta", delta: { stop_reason: "max_tokens", stop_sequence: null }, usage: { input_tokens: 9, output_tokens: 2 } });
  });

  test("tool calls: a tool_use block per call, its arguments as input_json_delta, stop_reason tool_use", async () => {
    const out = await translate([
      chunk({ role: "assistant", content: "" }),
      chunk({ content: "Checking." }),
      chunk({ tool_calls: [{ id: "call_1", type: "function", index: 0, function: { name: "f", arguments: '{"a"' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: ":1}" } }] }, "tool_calls"),
      "data: [DONE]\n\n",
    ]);
    expect(out.filter((e) => e.type === "content_block_start").map((e) => e.content_block)).toEqual([
      { type: "text", text: "" },
      { type: "tool_use", id: "call_1", name: "f", input: {} },
    ]);
    const json = out.filter((e) => e.type === "content_block_delta" && (e.delta as { type: string }).type === "input_json_delta");
    expect(json.map((e) => (e.delta as { partial_json: string }).partial_json).join("")).toBe('{"a":1}');
    expect(json.every((e) => e.index === 1)).toBe(true);
    expect(out.find((e) => e.type === "message_delta")!.delta).toEqual({ stop_reason: "tool_use", stop_sequence: null });
  });

  test("an error event the relay wrote in the Messages dialect passes as it is (no message_stop after it)", async () => {
    const brokenEnd = dialectFor("messages").brokenEnd("UPSTREAM_STREAM_TRUNCATED", "the engine connection broke mid-stream", 1);
    const out = await translate([chunk({ role: "assistant", content: "" }), chunk({ content: "Hi" }), ...brokenEnd.map((b) => dec.decode(b))]);
    expect(out.at(-1)).toEqual({ type: "error", error: { type: "api_error", message: "the engine connection broke mid-stream" } });
    expect(out.some((e) => e.type === "message_stop")).toBe(false);
  });
});

describe("the Messages event stream as the relay reads it", () => {
  test("content_block_delta is the token (TTFT there, not at message_start), message_stop the end, error an error", () => {
    expect(kind('event: message_start\ndata: {"type":"message_start","message":{}}')).toBe("meta");
    expect(kind('event: content_block_start\ndata: {"type":"content_block_start"}')).toBe("meta");
    expect(kind('event: ping\ndata: {"type":"ping"}')).toBe("meta");
    expect(kind('event: content_block_delta\ndata: {"type":"content_block_delta"}')).toBe("data");
    expect(kind('event: message_delta\ndata: {"type":"message_delta"}')).toBe("meta");
    expect(kind('event: message_stop\ndata: {"type":"message_stop"}')).toBe("final");
    expect(kind('event: error\ndata: {"type":"error","error":{}}')).toBe("error");
    expect(kind('data: {"type":"content_block_delta"}')).toBe("data");
    expect(kind(": keep-alive")).toBe("comment");
    expect(kind("event: message_stop")).toBe("malformed");
  });

  test("usage: input_tokens from message_start, output_tokens from message_delta; a tool_use block start is a tool call", () => {
    const meta = (s: string) => messagesMeta(enc.encode(s), 0, s.length);
    const start = meta('event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":11,"output_tokens":0}}}');
    let usage = mergeMessagesUsage(undefined, start.usage!);
    const delta = meta('event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}');
    usage = mergeMessagesUsage(usage, delta.usage!);
    expect(usage).toEqual({ prompt_tokens: 11, completion_tokens: 4 });
    expect(meta('event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t"}}').toolUse).toBe(true);
    expect(meta('event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}').toolUse).toBe(false);
  });

  test("a broken stream ends with the API's error event (typed by the code's status); only a stream ending with message_stop is whole for replay", () => {
    const [end] = dialectFor("messages").brokenEnd("UPSTREAM_IDLE_TIMEOUT", "the engine sent nothing within the inter-token deadline", 3);
    const text = dec.decode(end!);
    expect(text.startsWith("event: error\ndata: ")).toBe(true);
    expect(JSON.parse(text.slice(text.indexOf("data: ") + 6))).toEqual({
      type: "error",
      error: { type: "timeout_error", message: "the engine sent nothing within the inter-token deadline" },
    });
    const whole =
      'event: message_start\ndata: {"type":"message_start","message":{}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta"}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n';
    expect(sseEndedCleanly(enc.encode(whole))).toBe(true);
    expect(sseEndedCleanly(enc.encode(whole.slice(0, whole.indexOf("event: message_stop")) + text))).toBe(false);
  });

  test("Anthropic's error type by status", () => {
    expect([400, 401, 403, 404, 413, 429, 500, 502, 503, 504, 529].map(anthropicErrorType)).toEqual([
      "invalid_request_error",
      "authentication_error",
      "permission_error",
      "not_found_error",
      "request_too_large",
      "rate_limit_error",
      "api_error",
      "api_error",
      "overloaded_error",
      "timeout_error",
      "overloaded_error",
    ]);
  });
});
