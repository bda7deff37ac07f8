import { describe, expect, test } from "bun:test";
import { chooseFault, faultName, parseFault, parseFaultList } from "../../src/sim/faults.ts";
import { parseEmbeddingRequest, parseGenerationRequest } from "../../src/sim/openai-request.ts";
import { embeddingVector, StreamEncoder } from "../../src/sim/openai-response.ts";
import { countTokenEvents } from "../../src/sim/stream-probe.ts";
import { SimOutput, VOCAB } from "../../src/sim/text-model.ts";
import { countTextTokens, renderChat, textPrompt } from "../../src/sim/tokens.ts";
import { simErrorOf as err } from "../helpers/sim-http-error.ts";

const limits = { models: ["m"], maxModelLen: 100, blockSize: 4, outputLen: 8 };
const dec = new TextDecoder();

describe("sim tokens", () => {
  test("4 characters per token; chat rendered with role markers", () => {
    expect(countTextTokens("")).toBe(0);
    expect(countTextTokens("abcde")).toBe(2);
    expect(renderChat([{ role: "user", content: "hi" }])).toBe("<|user|>\nhi\n<|assistant|>\n");
    const p = textPrompt("a".repeat(40), 4); // 10 tokens → 2 full blocks
    expect(p.count).toBe(10);
    expect(p.blockHashes.length).toBe(2);
    expect(textPrompt("a".repeat(40) + "b", 4).blockHashes.slice(0, 2)).toEqual(p.blockHashes);
    expect(textPrompt("b" + "a".repeat(40), 4).blockHashes[0]).not.toBe(p.blockHashes[0]);
  });

  test("output tokens are JSON-safe and a long answer uses the whole vocabulary", () => {
    for (const w of VOCAB) expect(JSON.stringify(w)).toBe(`"${w}"`);
    const out = new SimOutput(3);
    const seen = new Set(Array.from({ length: 4_000 }, (_, i) => out.tokenText(i)));
    expect(seen.size).toBe(VOCAB.length);
  });
});

describe("sim faults", () => {
  test("parses the exact names and rejects others", () => {
    for (const n of ["500", "429", "503", "no-headers", "no-first-token", "stall:3", "cut:0", "slow:200"]) expect(faultName(parseFault(n)!)).toBe(n);
    for (const n of ["404", "stall", "cut:-1", "slow:0", "stall:x", ""]) expect(parseFault(n)).toBeUndefined();
    expect(() => parseFaultList(["500,bogus"])).toThrow(/bogus/);
  });

  test("header wins; rate picks among types", () => {
    expect(chooseFault("cut:2", 0, [])).toEqual({ kind: "cut", tokens: 2 });
    expect(chooseFault("nope", 0, [])).toBe("bad-header");
    expect(chooseFault(null, 0.5, [{ kind: "500" }], () => 0.9)).toBeUndefined();
    expect(chooseFault(null, 0.5, [{ kind: "500" }, { kind: "503" }], () => 0.1)).toEqual({ kind: "500" });
  });
});

describe("sim request parsing", () => {
  test("valid chat with max_tokens under output-len finishes by length; without, by stop", () => {
    const body = { model: "m", messages: [{ role: "user", content: "hello" }], stream: true, stream_options: { include_usage: true } };
    const a = parseGenerationRequest("chat", JSON.stringify({ ...body, max_tokens: 3 }), limits);
    expect([a.outputTokens, a.finishReason, a.includeUsage, a.stream]).toEqual([3, "length", true, true]);
    const b = parseGenerationRequest("chat", JSON.stringify(body), limits);
    expect([b.outputTokens, b.finishReason]).toEqual([8, "stop"]);
    const c = parseGenerationRequest("completion", JSON.stringify({ model: "m", prompt: "x", max_tokens: 20, ignore_eos: true }), limits);
    expect([c.outputTokens, c.finishReason]).toEqual([20, "length"]);
    const d = parseGenerationRequest("completion", JSON.stringify({ model: "m", prompt: [1, 2, 3], max_tokens: 20 }), limits);
    expect([d.prompt.count, d.outputTokens, d.finishReason]).toEqual([3, 8, "stop"]);
  });

  test("bad input maps to vLLM statuses and types", () => {
    const cases: [string, number, string][] = [
      ["{not json", 400, "BadRequestError"],
      ["[]", 400, "BadRequestError"],
      [JSON.stringify({ messages: [{ role: "user", content: "x" }] }), 400, "BadRequestError"],
      [JSON.stringify({ model: "other", messages: [{ role: "user", content: "x" }] }), 404, "NotFoundError"],
      [JSON.stringify({ model: "m", messages: "x" }), 400, "BadRequestError"],
      [JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }], max_tokens: "5" }), 400, "BadRequestError"],
      [JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }], stream: "yes" }), 400, "BadRequestError"],
      [JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(400) }] }), 400, "BadRequestError"],
      [JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }], max_tokens: 99 }), 400, "BadRequestError"],
    ];
    for (const [body, status, type] of cases) {
      const e = err(() => parseGenerationRequest("chat", body, limits));
      expect([e.status, e.type] as [number, string]).toEqual([status, type]);
    }
    expect(
      err(() => parseGenerationRequest("chat", JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(400) }] }), limits)).message,
    ).toMatch(/maximum context length is 100 tokens/);
    expect(err(() => parseEmbeddingRequest(JSON.stringify({ model: "m", input: 5 }), limits)).status).toBe(400);
  });
});

describe("sim SSE encoder", () => {
  test("chunks are exactly vLLM's JSON, field for field", () => {
    const out = new SimOutput(0);
    const e = new StreamEncoder("chat", "chatcmpl-1", 7, "m", true, out);
    const json = (b: Uint8Array) => {
      const s = dec.decode(b);
      expect(s.startsWith("data: ")).toBe(true);
      expect(s.endsWith("\n\n")).toBe(true);
      return JSON.parse(s.slice(6));
    };
    const head = { id: "chatcmpl-1", object: "chat.completion.chunk", created: 7, model: "m" };
    expect(json(e.role())).toEqual({
      ...head,
      choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }],
      usage: null,
    });
    expect(json(e.token(0, null))).toEqual({
      ...head,
      choices: [{ index: 0, delta: { content: out.tokenText(0) }, logprobs: null, finish_reason: null }],
      usage: null,
    });
    expect(json(e.token(1, "stop"))).toEqual({
      ...head,
      choices: [{ index: 0, delta: { content: out.tokenText(1) }, logprobs: null, finish_reason: "stop", stop_reason: null }],
      usage: null,
    });
    const end = dec.decode(e.end(5, 2)).split("\n\n");
    expect(JSON.parse(end[0]!.slice(6))).toEqual({ ...head, choices: [], usage: { prompt_tokens: 5, total_tokens: 7, completion_tokens: 2 } });
    expect(end[1]).toBe("data: [DONE]");
    const c = new StreamEncoder("completion", "cmpl-1", 7, "m", false, out);
    expect(json(c.token(0, "length"))).toEqual({
      id: "cmpl-1",
      object: "text_completion",
      created: 7,
      model: "m",
      choices: [{ index: 0, text: out.tokenText(0), logprobs: null, finish_reason: "length", stop_reason: null }],
    });
    expect(dec.decode(c.end(1, 1))).toBe("data: [DONE]\n\n");
  });

  test("the probe counts token events, not [DONE]", () => {
    const e = new StreamEncoder("completion", "cmpl-1", 7, "m", false, new SimOutput(0));
    const all = StreamEncoder.concat([e.token(0, null), e.token(1, "stop"), e.end(1, 2)]);
    expect(countTokenEvents(all)).toBe(2);
  });

  test("embeddings are deterministic unit vectors", () => {
    const a = embeddingVector("hello", 16);
    expect(embeddingVector("hello", 16)).toEqual(a);
    expect(embeddingVector("hullo", 16)).not.toEqual(a);
    expect(Math.sqrt(a.reduce((s, x) => s + x * x, 0))).toBeCloseTo(1, 9);
  });
});
