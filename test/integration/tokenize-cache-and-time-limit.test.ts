/**
 * The gateway's prompt tokenizer against a real sim-engine's /tokenize: the
 * keys are the engine's own ids cut in blocks, cached by the prompt (and by
 * its history, and by the heads of a long text) so that a later request
 * sharing them needs no call; prompts too short, with no live stream, or
 * naming a LoRA adapter are not tokenized; past the time limit a request goes on without its keys
 * (a slow engine), and the answer still fills the cache; the cache stays
 * under its ceiling; calls in flight are bounded.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Registry } from "prom-client";
import type { KvEventsConfig } from "../../src/config/kv-events-config.ts";
import { PromptTokenizer, type TokenizeTarget } from "../../src/gateway/prompt-tokens.ts";
import { registerKvEventsMetrics } from "../../src/metrics/kv-events-metrics.ts";
import { tokenBlockKeys } from "../../src/scheduling/token-blocks.ts";
import { KvEventStats } from "../../src/shared/kv-event-stats.ts";
import { counterValue, type Sim, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";
import { startRogueEngine } from "../helpers/rogue-engine.ts";

let sim: Sim;
beforeAll(async () => {
  sim = await startSim(["--model", "m"]);
});
afterAll(stopAll);

const SETTINGS: KvEventsConfig["tokenize"] = { timeoutMs: 500, minPromptTokens: 128, cacheBlocks: 1_024, maxInflight: 8, cutChars: 4_096 };

function tokenizer(url: string | undefined, over: Partial<KvEventsConfig["tokenize"]> = {}) {
  const registry = new Registry();
  const metrics = registerKvEventsMetrics(registry, new KvEventStats(4), () => []);
  const target: TokenizeTarget = { following: () => true, endpointFor: () => (url === undefined ? undefined : { url, headers: {} }) };
  return {
    t: new PromptTokenizer({ ...SETTINGS, ...over }, target, metrics),
    count: async (result: string) => counterValue(await registry.metrics(), "llmgw_tokenize_requests_total", { result }),
    skipped: async (reason: string) => counterValue(await registry.metrics(), "llmgw_tokenize_skipped_total", { reason }),
  };
}

async function engineKeys(body: Record<string, unknown>): Promise<number[]> {
  const res = await fetch(`${sim.api}/tokenize`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return tokenBlockKeys(((await res.json()) as { tokens: number[] }).tokens);
}

const system = "You answer questions about the KV cache, carefully and in order. ".repeat(30);
const messages = (q: string) => [
  { role: "system", content: system },
  { role: "user", content: q },
];

describe("prompt tokenizer", () => {
  test("a chat's keys are the engine's ids; the same prompt, then another question on the same history, are cache hits", async () => {
    const { t, count } = tokenizer(sim.api);
    const first = t.keysFor({ model: "m", messages: messages("what is a block?") }, "chat", "m", 500);
    expect(first).toBeInstanceOf(Promise);
    expect(await first).toEqual(await engineKeys({ model: "m", messages: messages("what is a block?") }));
    expect(await count("miss")).toBe(1);
    await Bun.sleep(50); // the history's call runs in the background
    expect(t.keysFor({ model: "m", messages: messages("what is a block?") }, "chat", "m", 500)).toEqual(
      await engineKeys({ model: "m", messages: messages("what is a block?") }),
    );
    const other = t.keysFor({ model: "m", messages: messages("and eviction?") }, "chat", "m", 500);
    expect(other).toEqual(await engineKeys({ model: "m", messages: messages("x").slice(0, 1), add_generation_prompt: false }));
    expect(await count("hit")).toBe(2);
  });

  test("a long completion prompt's heads are cached: another prompt sharing the head is routed on it with no call", async () => {
    const { t, count } = tokenizer(sim.api);
    const head = "The shared document that every question is about. ".repeat(200); // 10,200 characters
    await t.keysFor({ model: "m", prompt: `${head} Question one?` }, "completions", "m", 3_000);
    await Bun.sleep(100);
    // Cuts at 4,096 and 8,192 characters lie inside the shared head; the longest is used.
    const keys = t.keysFor({ model: "m", prompt: `${head} A different question?` }, "completions", "m", 3_000);
    expect(keys).toEqual(await engineKeys({ model: "m", prompt: head.slice(0, 8_192) }));
    expect(await count("hit")).toBe(1);
    // Token ids need no call.
    expect(t.keysFor({ model: "m", prompt: Array.from({ length: 200 }, (_, i) => i) }, "completions", "m", 200)).toEqual(
      tokenBlockKeys(Array.from({ length: 200 }, (_, i) => i)),
    );
  });

  test("short prompts, no live stream, batches and embeddings are not tokenized", async () => {
    const { t, skipped } = tokenizer(sim.api);
    expect(t.keysFor({ model: "m", messages: messages("hi") }, "chat", "m", 100)).toBeUndefined();
    expect(t.keysFor({ model: "m", prompt: ["a", "b"] }, "completions", "m", 500)).toBeUndefined();
    expect(t.keysFor({ model: "m", input: system }, "embeddings", "m", 500)).toBeUndefined();
    expect([await skipped("short"), await skipped("not_text")]).toEqual([1, 1]);
    const none = tokenizer(undefined);
    expect(none.t.keysFor({ model: "m", messages: messages("hi") }, "chat", "m", 500)).toBeUndefined();
    expect(await none.skipped("no_live_stream")).toBe(1);
  });

  test("a request naming a LoRA adapter is not tokenized: the index holds no adapter's blocks for its keys to match", async () => {
    const { t, skipped, count } = tokenizer(sim.api);
    expect(t.keysFor({ model: "sql-lora", messages: messages("what is a block?") }, "chat", "sql-lora", 500, true)).toBeUndefined();
    expect(await skipped("lora_adapter")).toBe(1);
    expect([await count("miss"), await count("hit")]).toEqual([0, 0]);
    expect(t.size.entries).toBe(0);
  });

  test("past the time limit the request goes on without keys; the late answer fills the cache; calls in flight are bounded", async () => {
    const slow = startRogueEngine(["m"], async (req, path) => {
      if (path !== "/tokenize") return new Response("", { status: 404 });
      const body = (await req.json()) as { prompt: string };
      await Bun.sleep(200);
      return Response.json({ count: 300, max_model_len: 4096, tokens: Array.from({ length: 300 }, (_, i) => i + body.prompt.length) });
    });
    try {
      const { t, count } = tokenizer(`http://127.0.0.1:${slow.port}`, { timeoutMs: 20, maxInflight: 1 });
      const t0 = performance.now();
      expect(await t.keysFor({ model: "m", prompt: "p".repeat(1_000) }, "completions", "m", 300)).toBeUndefined();
      expect(performance.now() - t0).toBeLessThan(150);
      expect(await count("timeout")).toBe(1);
      // The one call allowed is still in flight: another prompt is not asked for.
      expect(t.keysFor({ model: "m", prompt: "q".repeat(1_000) }, "completions", "m", 300)).toBeUndefined();
      expect(await count("busy")).toBe(1);
      await Bun.sleep(300);
      expect(t.keysFor({ model: "m", prompt: "p".repeat(1_000) }, "completions", "m", 300)).toEqual(
        tokenBlockKeys(Array.from({ length: 300 }, (_, i) => i + 1_000)),
      );
    } finally {
      slow.stop(true);
    }
  });

  test("the cache stays under its ceiling of blocks, least recently used going first", async () => {
    const { t } = tokenizer(sim.api, { cacheBlocks: 1_024 });
    // Each prompt is ~1,600 tokens (100 blocks): twelve of them do not fit in 1,024 blocks.
    const prompts = Array.from({ length: 12 }, (_, i) => `${i} `.repeat(3_200));
    for (const p of prompts) await t.keysFor({ model: "m", prompt: p }, "completions", "m", 1_600);
    expect(t.size.keys).toBeLessThanOrEqual(1_024);
    expect(t.size.keys).toBeGreaterThan(800);
    // The newest is cached, the oldest gone (asked for again: a promise).
    expect(t.keysFor({ model: "m", prompt: prompts[11]! }, "completions", "m", 1_600)).toBeArray();
    expect(t.keysFor({ model: "m", prompt: prompts[0]! }, "completions", "m", 1_600)).toBeInstanceOf(Promise);
  });
});
