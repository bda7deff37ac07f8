/**
 * The Responses API's stream as the relay reads it (classification by the
 * event line, usage from response.completed, a break ended with the API's
 * own error and response.failed events), its continuation (what can be
 * continued, the body, the tracker and the rewriter), which routes an
 * endpoint serves (configured, learned from route-missing 404s), and the
 * pure conversation state: expansion of a follow-up, listed input items and
 * their pages.
 */
import { describe, expect, test } from "bun:test";
import { ResponsesTracker, responsesContinuable, responsesContinuationBody } from "../../src/gateway/continuation/responses-continuation.ts";
import { usageFromTail } from "../../src/gateway/proxy/json-answer.ts";
import type { RelayOwner } from "../../src/gateway/proxy/relay.ts";
import { classifyResponsesEvent } from "../../src/gateway/proxy/responses-events.ts";
import { relayBody } from "../../src/gateway/proxy/sse-response.ts";
import { answerToolCalls, chatToolCallStarts } from "../../src/gateway/proxy/stream-dialect.ts";
import { RouteSupport, routeMissing } from "../../src/gateway/route-support.ts";
import { type ConversationLink, expandedInput, inputItemsPage, listedItems } from "../../src/jobs/responses-objects.ts";
import { sseEndedCleanly } from "../../src/shared/recorded-response.ts";
import { openStreamOf } from "../helpers/scripted-stream.ts";

const enc = new TextEncoder();
const ev = (type: string, body: Record<string, unknown> = {}) => `event: ${type}\ndata: ${JSON.stringify({ ...body, type })}\n\n`;
const CREATED = ev("response.created", { response: { id: "resp_1", object: "response", status: "in_progress", model: "m", output: [] }, sequence_number: 0 });
const DELTA = (t: string, n: number) => ev("response.output_text.delta", { delta: t, item_id: "msg_1", output_index: 0, content_index: 0, sequence_number: n });
const COMPLETED = ev("response.completed", {
  response: { id: "resp_1", status: "completed", usage: { input_tokens: 9, output_tokens: 2, total_tokens: 11 } },
  sequence_number: 5,
});

function kindOf(text: string): string {
  const b = enc.encode(text);
  return classifyResponsesEvent(b, 0, b.length - 2);
}

function owner(offersTools = false) {
  const ends: { outcome: string; code?: string }[] = [];
  let tokens = 0;
  const o: RelayOwner & { ends: typeof ends; tokenCalls: () => number } = {
    route: "responses",
    offersTools,
    toolCalls: 0,
    includeUsage: false,
    choices: 1,
    delivered: 0,
    usage: undefined,
    ends,
    tokenCalls: () => tokens,
    firstToken() {
      tokens++;
    },
    tokens() {
      tokens++;
    },
    malformed() {},
    endAttempt() {},
    finish(outcome, _status, _error, code) {
      ends.push(code === undefined ? { outcome } : { outcome, code });
    },
  };
  return o;
}

async function relay(chunks: (string | Error)[], o = owner()) {
  const text = await new Response(relayBody(o, openStreamOf(chunks, classifyResponsesEvent))).text();
  const events = text
    .split("\n\n")
    .filter(Boolean)
    .map((e) => JSON.parse(e.slice(e.indexOf("data:") + 5)) as { type: string; [k: string]: unknown });
  return { events, owner: o };
}

describe("the Responses API's stream in the relay", () => {
  test("events are classified by their event line: deltas are tokens, the completed event is final, failures are errors", () => {
    expect(kindOf(CREATED)).toBe("meta");
    expect(kindOf(DELTA("a", 1))).toBe("data");
    expect(kindOf(ev("response.function_call_arguments.delta", { delta: "{" }))).toBe("data");
    expect(kindOf(ev("response.output_item.added", { item: { type: "function_call" } }))).toBe("meta");
    expect(kindOf(COMPLETED)).toBe("final");
    expect(kindOf(ev("response.incomplete", { response: {} }))).toBe("final");
    expect(kindOf(ev("response.failed", { response: {} }))).toBe("error");
    expect(kindOf(ev("error", { message: "x" }))).toBe("error");
    expect(kindOf(": keep-alive\n\n")).toBe("comment");
    expect(kindOf("event: response.created\n\n")).toBe("malformed"); // no data line
    // No event line: read by the JSON's type.
    expect(kindOf(`data: ${JSON.stringify({ type: "response.output_text.delta", delta: "x" })}\n\n`)).toBe("data");
  });

  test("a whole stream passes untouched; usage comes from response.completed; TTFT at the first delta, not at response.created", async () => {
    const chunks = [CREATED, DELTA("a", 1) + DELTA("b", 2), COMPLETED];
    const { events, owner: o } = await relay(chunks);
    expect(events.map((e) => e.type)).toEqual(["response.created", "response.output_text.delta", "response.output_text.delta", "response.completed"]);
    expect(o.usage).toEqual({ prompt_tokens: 9, completion_tokens: 2 });
    expect(o.ends).toEqual([{ outcome: "ok" }]);
    expect(o.delivered).toBe(2);
    expect(o.tokenCalls()).toBe(1); // one chunk carried tokens (created alone is not a token)
  });

  test("a stream cut after commit ends with the API's error then response.failed (same response id, next sequence numbers), no [DONE]", async () => {
    const { events, owner: o } = await relay([CREATED, DELTA("a", 1), new Error("socket closed")]);
    expect(events.map((e) => e.type)).toEqual(["response.created", "response.output_text.delta", "error", "response.failed"]);
    const [err, failed] = events.slice(-2) as unknown as [
      { code: string; sequence_number: number },
      { response: { id: string; status: string; error: { code: string } }; sequence_number: number },
    ];
    expect(err.code).toBe("UPSTREAM_STREAM_TRUNCATED");
    expect(err.sequence_number).toBe(2);
    expect(failed.sequence_number).toBe(3);
    expect(failed.response).toMatchObject({ id: "resp_1", status: "failed", error: { code: "UPSTREAM_STREAM_TRUNCATED" } });
    expect(o.ends).toEqual([{ outcome: "stream_error", code: "UPSTREAM_STREAM_TRUNCATED" }]);
  });

  test("an engine's own response.failed mid-stream is a break too; a stream that ends without its final event is truncated", async () => {
    const failed = await relay([CREATED, DELTA("a", 1), ev("response.failed", { response: { error: { message: "boom" } } })]);
    expect(failed.events.at(-1)!.type).toBe("response.failed");
    expect(failed.owner.ends[0]!.code).toBe("UPSTREAM_ERROR");
    const short = await relay([CREATED, DELTA("a", 1)]);
    expect(short.events.slice(-2).map((e) => e.type)).toEqual(["error", "response.failed"]);
  });

  test("tool calls are counted when tools were offered: a function_call item in a Responses stream, a call's first delta in chat", async () => {
    const o = owner(true);
    await relay(
      [
        CREATED,
        ev("response.output_item.added", { item: { type: "function_call", name: "f" } }) + ev("response.function_call_arguments.delta", { delta: "{}" }),
        COMPLETED,
      ],
      o,
    );
    expect(o.toolCalls).toBe(1);
    const chunk = enc.encode(
      'data: {"choices":[{"delta":{"tool_calls":[{"id":"c1","type":"function","index":0,"function":{"name":"f","arguments":""}},{"id":"c2","type":"function","index":1,"function":{"name":"g","arguments":""}}]}}]}',
    );
    expect(chatToolCallStarts(chunk, 0, chunk.length)).toBe(2);
    const later = enc.encode(
      'data: {"id":"chatcmpl-1","choices":[{"delta":{"tool_calls":[{"id":null,"type":"function","index":0,"function":{"name":null,"arguments":"{\\"id\\":\\"x\\"}"}}]}}]}',
    );
    expect(chatToolCallStarts(later, 0, later.length)).toBe(0); // SGLang's later deltas; an "id" inside the arguments is escaped
    expect(answerToolCalls(enc.encode('{"tools":[{"type":"function","name":"f"}],"output":[{"type":"function_call","name":"f"}]}'), "responses")).toBe(1);
  });

  test("a recorded Responses stream is whole when it ends with response.completed, not when it failed (idempotent replay)", () => {
    expect(sseEndedCleanly(enc.encode(CREATED + DELTA("a", 1) + COMPLETED))).toBe(true);
    expect(sseEndedCleanly(enc.encode(CREATED + ev("error", { code: "X" }) + ev("response.failed", { response: {} })))).toBe(false);
    expect(sseEndedCleanly(enc.encode(CREATED + DELTA("a", 1)))).toBe(false);
  });

  test("usage in any engine's shape: prompt/completion, input/output (Responses), total only (rerank)", () => {
    expect(usageFromTail(enc.encode('{"usage":{"input_tokens":3,"output_tokens":4,"total_tokens":7},"user":null}'))).toEqual({
      prompt_tokens: 3,
      completion_tokens: 4,
    });
    expect(usageFromTail(enc.encode('{"results":[],"usage":{"total_tokens":12}}'))).toEqual({ prompt_tokens: 12, completion_tokens: 0 });
    expect(usageFromTail(enc.encode('{"text":"x","usage":{"type":"duration","seconds":3}}'))).toBeUndefined();
  });
});

describe("which routes an endpoint serves", () => {
  test("configured routes are the only ones; a route-missing 404 is learned per path, a model's 404 is not", () => {
    const r = new RouteSupport([
      {
        id: "tok",
        url: "http://x",
        models: ["m"],
        modelsSource: "static",
        pool: "default",
        engine: "auto",
        gpuIds: [],
        dcgmUrl: undefined,
        kvEvents: undefined,
        routes: ["tokenize"],
      },
    ]);
    expect(r.limited).toBe(true);
    expect(r.serves("tok", "tokenize", "/tokenize")).toBe(true);
    expect(r.serves("tok", "chat", "/v1/chat/completions")).toBe(false);
    expect(r.serves("sim", "rerank", "/v2/rerank")).toBe(true);
    expect(r.learn("sim", "/v2/rerank", enc.encode('{"error":{"message":"The model `x` does not exist.","code":404}}'))).toBe(false);
    expect(r.learn("sim", "/v2/rerank", enc.encode('{"detail":"Not Found"}'))).toBe(true);
    expect(r.serves("sim", "rerank", "/v2/rerank")).toBe(false);
    expect(r.serves("sim", "rerank", "/rerank")).toBe(true);
    expect(routeMissing(enc.encode('{"error":{"message":"Invalid URL (POST /v1/score)","type":"invalid_request_error"}}'))).toBe(true);
    expect(routeMissing(undefined)).toBe(false);
    expect(new RouteSupport([]).limited).toBe(false);
  });
});

describe("conversation state", () => {
  const stored = (context: unknown[], output: unknown[]): ConversationLink[] => [
    { response: JSON.stringify({ id: "resp_1", output }), context: JSON.stringify(context) },
  ];

  test("a follow-up's input is the stored conversation, its output, then the new input", () => {
    const out = { type: "message", role: "assistant", content: [{ type: "output_text", text: "hi" }] };
    const next = expandedInput(stored([{ role: "user", content: "a" }], [out]), [{ role: "user", content: "b" }]);
    expect(next).toEqual([{ role: "user", content: "a" }, out, { role: "user", content: "b" }]);
  });

  test("a chain of stored turns expands oldest first, each turn's items then its output", () => {
    const o1 = { type: "message", role: "assistant", content: "one" };
    const o2 = { type: "message", role: "assistant", content: "two" };
    const links = [...stored([{ role: "user", content: "a" }], [o1]), ...stored([{ role: "user", content: "b" }], [o2])];
    expect(expandedInput(links, [{ role: "user", content: "c" }])).toEqual([
      { role: "user", content: "a" },
      o1,
      { role: "user", content: "b" },
      o2,
      { role: "user", content: "c" },
    ]);
  });

  test("input items are listed with ids and typed content; pages go newest first by default, after a cursor", () => {
    const items = listedItems([
      { role: "user", content: "one" },
      { id: "msg_given", type: "message", role: "user", content: [{ type: "input_text", text: "two" }] },
      { type: "function_call_output", call_id: "c", output: "42" },
    ]);
    expect(items[0]).toMatchObject({ type: "message", content: [{ type: "input_text", text: "one" }] });
    expect(items[0]!.id).toMatch(/^msg_/);
    expect(items[1]!.id).toBe("msg_given");
    expect(items[2]!.id).toMatch(/^fco_/);
    const page = inputItemsPage(items, { limit: 2, order: "desc" })!;
    expect(page.data).toEqual([items[2], items[1]]);
    expect(page.has_more).toBe(true);
    const rest = inputItemsPage(items, { limit: 2, order: "desc", after: page.last_id as string })!;
    expect(rest.data).toEqual([items[0]]);
    expect(rest.has_more).toBe(false);
    expect(inputItemsPage(items, { limit: 2, order: "asc", after: "msg_nope" })).toBeUndefined();
  });
});

describe("continuing a Responses stream", () => {
  const body = { model: "m", input: "Tell me", stream: true, max_output_tokens: 10 };

  test("what can be continued: a text stream; not tools, logprobs, structured output or a non-stream", () => {
    expect(responsesContinuable(body)).toEqual({ ok: true });
    expect(responsesContinuable({ ...body, stream: false })).toEqual({ ok: false, reason: "not_streaming" });
    expect(responsesContinuable({ ...body, tools: [{ type: "function", name: "f" }] })).toEqual({ ok: false, reason: "tools" });
    expect(responsesContinuable({ ...body, tools: [{ type: "function", name: "f" }], tool_choice: "none" })).toEqual({ ok: true });
    expect(responsesContinuable({ ...body, include: ["message.output_text.logprobs"] })).toEqual({ ok: false, reason: "logprobs" });
    expect(responsesContinuable({ ...body, text: { format: { type: "json_schema", name: "x", schema: {} } } })).toEqual({
      ok: false,
      reason: "structured_output",
    });
  });

  test("the continuation body: the input, then the delivered text as an in_progress assistant message; max_output_tokens reduced", () => {
    const out = JSON.parse(responsesContinuationBody(body, " a b", 2, "m2")!) as Record<string, unknown>;
    expect(out.model).toBe("m2");
    expect(out.max_output_tokens).toBe(8);
    expect(out.input).toEqual([
      { role: "user", content: "Tell me" },
      { type: "message", role: "assistant", status: "in_progress", content: [{ type: "output_text", text: " a b" }] },
    ]);
    expect(responsesContinuationBody(body, " a".repeat(10), 10)).toBeUndefined();
  });

  test("the tracker reads what went out; the rewriter drops the continuation's opening, renumbers, and makes the closing events whole", () => {
    const tracker = new ResponsesTracker();
    const added = ev("response.output_item.added", {
      item: { id: "msg_orig", type: "message", role: "assistant", content: [], status: "in_progress" },
      output_index: 0,
      sequence_number: 1,
    });
    for (const e of [CREATED, added, DELTA(" a", 2), DELTA(" b", 3)]) tracker.observeData(enc.encode(e));
    const point = tracker.resumePoint();
    expect(point).toEqual({ ok: true, text: " a b", tokens: 2 });
    const seg = tracker.segment({ text: " a b", tokens: 2 });
    const rw = (text: string, kind: "data" | "meta" | "final") => {
      const out = seg.rewrite({ kind, bytes: enc.encode(text) });
      return out === undefined ? undefined : (JSON.parse(new TextDecoder().decode(out).split("data: ")[1]!) as Record<string, unknown>);
    };
    expect(rw(ev("response.created", { response: { id: "resp_cont" }, sequence_number: 0 }), "meta")).toBeUndefined();
    expect(rw(ev("response.output_item.added", { item: { id: "msg_cont", type: "message" }, sequence_number: 2 }), "meta")).toBeUndefined();
    expect(rw(DELTA(" c", 4).replace("msg_1", "msg_cont"), "data")).toMatchObject({ delta: " c", item_id: "msg_orig", sequence_number: 4 });
    expect(rw(ev("response.output_text.done", { item_id: "msg_cont", text: " c", sequence_number: 5 }), "meta")).toMatchObject({
      text: " a b c",
      item_id: "msg_orig",
      sequence_number: 5,
    });
    const final = rw(
      ev("response.completed", {
        response: {
          id: "resp_cont",
          created_at: 9,
          output: [{ id: "msg_cont", type: "message", content: [{ type: "output_text", text: " c" }] }],
          usage: { input_tokens: 12, output_tokens: 1, total_tokens: 13 },
        },
        sequence_number: 6,
      }),
      "final",
    )!;
    expect(final.sequence_number).toBe(6);
    expect(final.response).toMatchObject({
      id: "resp_1",
      output: [{ id: "msg_orig", content: [{ text: " a b c" }] }],
      usage: { input_tokens: 10, output_tokens: 3, total_tokens: 13 },
    });
    expect(seg.usage).toEqual({ prompt_tokens: 10, completion_tokens: 3 });
  });

  test("a stream that started a function_call item or finished its text is not resumed", () => {
    const t = new ResponsesTracker();
    t.observeData(enc.encode(CREATED));
    t.observeData(enc.encode(ev("response.output_item.added", { item: { id: "fc_1", type: "function_call" }, sequence_number: 1 })));
    expect(t.resumePoint()).toEqual({ ok: false, reason: "tool_calls" });
    const done = new ResponsesTracker();
    for (const e of [
      CREATED,
      ev("response.output_item.added", { item: { id: "m", type: "message" }, sequence_number: 1 }),
      DELTA("x", 2),
      ev("response.output_text.done", { text: "x", sequence_number: 3 }),
    ])
      done.observeData(enc.encode(e));
    expect(done.resumePoint()).toEqual({ ok: false, reason: "finished" });
  });
});
