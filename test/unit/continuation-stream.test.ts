/**
 * The stream side of a continuation, on literal chunks in vLLM's and
 * SGLang's shapes: the tracker reads what the original stream delivered, the
 * rewriter makes a continuation's chunks look like the original stream's,
 * and what each costs per chunk (printed).
 */
import { describe, expect, test } from "bun:test";
import { ContinuationRewriter } from "../../src/gateway/continuation/chunk-rewriter.ts";
import { Delivery } from "../../src/gateway/continuation/delivery.ts";
import { StreamTracker } from "../../src/gateway/continuation/stream-tracker.ts";
import { type ScannedEvent, SseScanner } from "../../src/gateway/proxy/sse-scanner.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

function scan(sse: string): ScannedEvent[] {
  return new SseScanner().push(enc.encode(sse));
}

/** vLLM 0.11's chat chunk, key for key (serving_chat.py; the sim writes the same bytes). */
function vllmChat(id: string, created: number, model: string, delta: string, finish = "null", usage = ',"usage":null'): string {
  const stop = finish === "null" ? "" : ',"stop_reason":null';
  return `data: {"id":"${id}","object":"chat.completion.chunk","created":${created},"model":"${model}","choices":[{"index":0,"delta":${delta},"logprobs":null,"finish_reason":${finish}${stop}}]${usage}}\n\n`;
}

function vllmCompletion(id: string, text: string, finish = "null"): string {
  return `data: {"id":"${id}","object":"text_completion","created":1760000000,"model":"m","choices":[{"index":0,"text":${JSON.stringify(text)},"logprobs":null,"finish_reason":${finish},"stop_reason":null}],"usage":null}\n\n`;
}

const ORIGINAL = [
  vllmChat("chatcmpl-orig", 1760000000, "org/model", '{"role":"assistant","content":""}'),
  vllmChat("chatcmpl-orig", 1760000000, "org/model", '{"content":"Hello"}'),
  vllmChat("chatcmpl-orig", 1760000000, "org/model", '{"content":" \\"world\\""}'),
  vllmChat("chatcmpl-orig", 1760000000, "org/model", '{"content":"\\n caf\\u00e9"}'),
  vllmChat("chatcmpl-orig", 1760000000, "org/model", '{"content":" 🚀 C:\\\\"}'),
].join("");
const DELIVERED = 'Hello "world"\n café 🚀 C:\\';

describe("StreamTracker on the original stream", () => {
  test("reads text, tokens and identity from vLLM chunks; the role chunk is no token", () => {
    const t = new StreamTracker("chat");
    for (const e of scan(ORIGINAL)) t.observe(e);
    expect(t.identity).toEqual({ id: "chatcmpl-orig", created: 1760000000, model: "org/model" });
    expect(t.resumePoint()).toEqual({ ok: true, text: DELIVERED, tokens: 4 });
  });

  test("a finish_reason means the answer is complete; SGLang's null role, reasoning and tool_calls are nothing", () => {
    const sglang = (content: string, finish: string) =>
      `data: {"id":"3d7c","object":"chat.completion.chunk","created":1760000000,"model":"default","choices":[{"index":0,"delta":{"role":null,"content":${JSON.stringify(content)},"reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":${finish},"matched_stop":null}],"usage":null}\n\n`;
    const t = new StreamTracker("chat");
    for (const e of scan(sglang(" a", "null") + sglang(" b", "null"))) t.observe(e);
    expect(t.resumePoint()).toEqual({ ok: true, text: " a b", tokens: 2 });
    for (const e of scan(sglang(".", '"stop"'))) t.observe(e);
    expect(t.resumePoint()).toEqual({ ok: false, reason: "finished" });
  });

  test("JSON with spaces, completions' text, and the engine's running usage count", () => {
    const spaced =
      'data: {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [{"index": 0, "delta": {"content" : "a b"}, "finish_reason": null}], "usage": {"prompt_tokens": 9, "total_tokens": 14, "completion_tokens": 5}}\n\n';
    const t = new StreamTracker("chat");
    for (const e of scan(spaced)) t.observe(e);
    expect(t.resumePoint()).toEqual({ ok: true, text: "a b", tokens: 5 });
    const c = new StreamTracker("completions");
    for (const e of scan(vllmCompletion("cmpl-1", " there") + vllmCompletion("cmpl-1", " was"))) c.observe(e);
    expect(c.resumePoint()).toEqual({ ok: true, text: " there was", tokens: 2 });
  });

  test("tool calls and reasoning cannot be continued exactly; an unreadable chunk is not guessed at", () => {
    const tool = new StreamTracker("chat");
    for (const e of scan(vllmChat("c", 1, "m", '{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":""}}]}')))
      tool.observe(e);
    expect(tool.resumePoint()).toEqual({ ok: false, reason: "tool_calls" });
    const think = new StreamTracker("chat");
    for (const e of scan(vllmChat("c", 1, "m", '{"reasoning_content":"Let me think"}'))) think.observe(e);
    expect(think.resumePoint()).toEqual({ ok: false, reason: "reasoning" });
    const odd = new StreamTracker("chat");
    for (const e of scan('data: {"id":"c","created":1,"model":"m","result":"x"}\n\n')) odd.observe(e);
    expect(odd.resumePoint()).toEqual({ ok: false, reason: "unreadable_chunk" });
    expect(new StreamTracker("chat").resumePoint()).toEqual({ ok: false, reason: "no_chunk_yet" });
  });

  test("matches JSON.parse on every string JSON.stringify can write", () => {
    const alphabet = ['"', "\\", "\n", "\t", "\u0001", "é", "🚀", "\u2028", "a", " ", "/", "}", '"content":"x"', "\\u0041"];
    let seed = 7;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const d = new Delivery("chat");
    let want = "";
    for (let i = 0; i < 500; i++) {
      let s = "";
      for (let j = Math.floor(rand() * 6); j > 0; j--) s += alphabet[Math.floor(rand() * alphabet.length)];
      want += s;
      d.observe(enc.encode(vllmChat("c", 1, "m", JSON.stringify({ content: s }))));
    }
    expect(d.text()).toBe(want);
  });
});

/** A continuation of ORIGINAL from another replica serving the fallback model, as vLLM streams it with include_usage. */
const CONTINUATION = [
  vllmChat("chatcmpl-cont", 1760000099, "fallback", '{"role":"assistant","content":""}'),
  vllmChat("chatcmpl-cont", 1760000099, "fallback", '{"content":" and"}'),
  vllmChat("chatcmpl-cont", 1760000099, "fallback", '{"content":" more"}', '"stop"'),
  'data: {"id":"chatcmpl-cont","object":"chat.completion.chunk","created":1760000099,"model":"fallback","choices":[],"usage":{"prompt_tokens":24,"total_tokens":26,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":16}}}\n\n',
  "data: [DONE]\n\n",
].join("");

describe("ContinuationRewriter", () => {
  const identity = { id: "chatcmpl-orig", created: 1760000000, model: "org/model" };

  test("one seamless stream: original identity, no second role, one honest usage, tracked text", () => {
    const r = new ContinuationRewriter("chat", identity, { text: DELIVERED, tokens: 4 });
    const out = scan(CONTINUATION)
      .map((e) => r.rewrite(e))
      .filter((b) => b !== undefined)
      .map((b) => dec.decode(b));
    expect(out.length).toBe(4); // role chunk dropped
    // Byte-exact: only the envelope changed.
    expect(out[0]).toBe(vllmChat("chatcmpl-orig", 1760000000, "org/model", '{"content":" and"}'));
    expect(out[1]).toBe(vllmChat("chatcmpl-orig", 1760000000, "org/model", '{"content":" more"}', '"stop"'));
    expect(out[2]).toBe(
      `data: ${JSON.stringify({ id: "chatcmpl-orig", object: "chat.completion.chunk", created: 1760000000, model: "org/model", choices: [], usage: { prompt_tokens: 20, total_tokens: 26, completion_tokens: 6 } })}\n\n`,
    );
    expect(out[3]).toBe("data: [DONE]\n\n");
    expect(r.usage).toEqual({ prompt_tokens: 20, completion_tokens: 6 });
    expect(r.delivery.text()).toBe(`${DELIVERED} and more`);
    expect(r.resumePoint()).toEqual({ ok: false, reason: "finished" });
  });

  test("a continuation that breaks too gives the next one the whole delivered text", () => {
    const r = new ContinuationRewriter("chat", identity, { text: DELIVERED, tokens: 4 }, { originalPromptTokens: 11 });
    for (const e of scan(CONTINUATION.split("data: ").slice(0, 3).join("data: "))) r.rewrite(e);
    expect(r.resumePoint()).toEqual({ ok: true, text: `${DELIVERED} and`, tokens: 5 });
    const again = new ContinuationRewriter("chat", identity, { text: `${DELIVERED} and`, tokens: 5 }, { originalPromptTokens: 11 });
    const usage = scan(CONTINUATION).find((e) => e.kind === "usage")!;
    expect(JSON.parse(dec.decode(again.rewrite(usage)!).slice(6)).usage).toEqual({ prompt_tokens: 11, total_tokens: 18, completion_tokens: 7 });
  });

  test("a role that comes with content loses only the role; a chunk with another envelope is rewritten through JSON", () => {
    const r = new ContinuationRewriter("chat", identity, { text: "", tokens: 0 });
    const first = r.rewrite(scan(vllmChat("x", 5, "m2", '{"role":"assistant","content":"Hi"}'))[0]!)!;
    expect(JSON.parse(dec.decode(first).slice(6))).toEqual({
      ...identity,
      object: "chat.completion.chunk",
      choices: [{ index: 0, delta: { content: "Hi" }, logprobs: null, finish_reason: null }],
      usage: null,
    });
    const odd = r.rewrite(scan('data: {"model":"m2","id":"x","choices":[{"index":0,"delta":{"content":"!"}}]}\n\n')[0]!)!;
    expect(JSON.parse(dec.decode(odd).slice(6))).toEqual({
      model: "org/model",
      id: "chatcmpl-orig",
      choices: [{ index: 0, delta: { content: "!" } }],
      created: 1760000000,
    });
    expect(r.resumePoint()).toEqual({ ok: true, text: "Hi!", tokens: 2 });
  });

  test("completions: ids replaced, text tracked", () => {
    const r = new ContinuationRewriter("completions", { id: "cmpl-orig", created: 1760000000, model: "m" }, { text: " there", tokens: 1 });
    const out = dec.decode(r.rewrite(scan(vllmCompletion("cmpl-cont", " was"))[0]!)!);
    expect(out).toBe(vllmCompletion("cmpl-orig", " was"));
    expect(r.resumePoint()).toEqual({ ok: true, text: " there was", tokens: 2 });
  });
});

describe("per-chunk cost (printed)", () => {
  test("tracker and rewriter per chunk, against JSON.parse of the same chunk", () => {
    const words = [" the", " of", " and", ' \\"quoted\\"', " café", "\\n"];
    const sse = Array.from({ length: 256 }, (_, i) =>
      vllmChat("chatcmpl-0123456789abcdef0123456789abcdef", 1760000000, "meta-llama/Llama-3.1-8B-Instruct", `{"content":"${words[i % words.length]}"}`),
    ).join("");
    const events = scan(sse);
    const rounds = 400;
    const time = (fn: () => void) => {
      for (let r = 0; r < 100; r++) fn(); // let the JIT settle
      const t0 = Bun.nanoseconds();
      for (let r = 0; r < rounds; r++) fn();
      return (Bun.nanoseconds() - t0) / (rounds * events.length);
    };
    let tracker = new StreamTracker("chat");
    const trackNs = time(() => {
      tracker = new StreamTracker("chat");
      for (const e of events) tracker.observe(e);
    });
    let sink = 0;
    const parseNs = time(() => {
      for (const e of events)
        sink += (JSON.parse(dec.decode(e.bytes.subarray(6))) as { choices: { delta: { content: string } }[] }).choices[0]!.delta.content.length;
    });
    let rewriter = new ContinuationRewriter("chat", tracker.identity!, { text: "", tokens: 0 });
    const rewriteNs = time(() => {
      rewriter = new ContinuationRewriter("chat", { id: "chatcmpl-orig", created: 1, model: "m" }, { text: "", tokens: 0 });
      for (const e of events) sink += rewriter.rewrite(e)?.length ?? 0;
    });
    const textNs = time(() => void (sink += tracker.delivery.text()!.length)) * events.length;
    console.log(
      `per chunk (${events[0]!.bytes.length} B): tracker ${trackNs.toFixed(0)} ns, rewriter ${rewriteNs.toFixed(0)} ns, JSON.parse+decode ${parseNs.toFixed(0)} ns; decoding ${events.length} chunks' text once: ${(textNs / 1000).toFixed(1)} µs`,
    );
    expect(sink).toBeGreaterThan(0);
    const want = Array.from({ length: 256 }, (_, i) => JSON.parse(`"${words[i % words.length]}"`) as string).join("");
    expect(tracker.resumePoint()).toEqual({ ok: true, text: want, tokens: 256 });
    expect(rewriter.resumePoint()).toEqual({ ok: true, text: want, tokens: 256 });
    // Generous: catches a pathological regression (a re-scan of the whole buffer per chunk), not machine noise.
    expect(trackNs).toBeLessThan(20_000);
    expect(rewriteNs).toBeLessThan(20_000);
  });
});
