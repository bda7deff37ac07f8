/**
 * A sim-engine started with vLLM's --kv-events-config publishes its KV
 * cache's events over ZMQ: the token ids in BlockStored are the ones its
 * /tokenize gives for the same prompt (chat template applied), two engines
 * give the same text the same ids and different block hashes (as vLLM's
 * random NONE_HASH does), eviction publishes BlockRemoved and
 * /reset_prefix_cache AllBlocksCleared; /detokenize gives the text back.
 */
import { afterAll, expect, test } from "bun:test";
import type { BlockStored, KvCacheEvent } from "../../src/engines/kv-events/model.ts";
import { KvEventSubscriber } from "../../src/engines/kv-events/subscriber.ts";
import { type Started, startLlmgw, stopAll, waitUntil } from "../helpers/processes.ts";

afterAll(stopAll);

const KV = JSON.stringify({ enable_kv_cache_events: true, publisher: "zmq", endpoint: "tcp://*:0", replay_endpoint: "tcp://*:0", topic: "kv@sim@m" });

async function startSim(extra: string[] = []): Promise<Started> {
  return startLlmgw(["sim-engine", "--port", "0", "--model", "m", "--itl-ms", "1", "--output-len", "2", "--kv-events-config", KV, ...extra], { waitFor: 3 });
}

function follow(sim: Started): { events: KvCacheEvent[]; sub: KvEventSubscriber } {
  const events: KvCacheEvent[] = [];
  const sub = new KvEventSubscriber(
    { endpoint: sim.urls["kv-events"]!, replayEndpoint: sim.urls["kv-replay"]!, topic: "kv@sim" },
    { batch: (b) => events.push(...b.events), reset: () => {} },
  );
  return { events, sub };
}

const post = async (sim: Started, path: string, body: unknown) => {
  const res = await fetch(`${sim.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

const messages = [
  { role: "system", content: "You are a careful assistant who answers in full sentences. ".repeat(8) },
  { role: "user", content: "What is a KV cache?" },
];

test("BlockStored carries /tokenize's ids; two engines agree on ids, not on hashes", async () => {
  const [a, b] = await Promise.all([startSim(), startSim()]);
  const fa = follow(a);
  const fb = follow(b);
  try {
    const tok = await post(a, "/tokenize", { model: "m", messages });
    expect(tok.status).toBe(200);
    const ids = tok.body.tokens as number[];
    expect(tok.body).toMatchObject({ count: ids.length, max_model_len: expect.any(Number), token_strs: null });
    expect((await post(b, "/tokenize", { messages })).body.tokens).toEqual(ids);
    // A chat prefix (history without the generation prompt) is a prefix of the whole.
    const head = (await post(a, "/tokenize", { messages: messages.slice(0, 1), add_generation_prompt: false })).body.tokens as number[];
    expect(ids.slice(0, head.length)).toEqual(head);

    await waitUntil(() => fa.sub.stats().connected && fb.sub.stats().connected && fa.sub.stats().replayRequests > 0, { what: "subscribed" });
    for (const sim of [a, b]) expect((await post(sim, "/v1/chat/completions", { model: "m", messages, max_tokens: 2 })).status).toBe(200);
    const stored = (f: { events: KvCacheEvent[] }) => f.events.filter((e): e is BlockStored => e.type === "BlockStored");
    await waitUntil(() => stored(fa).length > 0 && stored(fb).length > 0, { what: "BlockStored from both" });
    const full = Math.floor(ids.length / 16) * 16;
    await waitUntil(() => stored(fa).flatMap((e) => e.tokenIds).length === full, { what: "every full block stored" });
    expect(stored(fa).flatMap((e) => e.tokenIds)).toEqual(ids.slice(0, full));
    expect(stored(fa)[0]).toMatchObject({ parentBlockHash: null, blockSize: 16, medium: "GPU" });
    expect(stored(fb).flatMap((e) => e.tokenIds)).toEqual(ids.slice(0, full));
    expect(stored(fa)[0]!.blockHashes[0]).not.toEqual(stored(fb)[0]!.blockHashes[0]);

    const detok = await post(a, "/detokenize", { model: "m", tokens: ids });
    expect(detok.body.prompt).toBe(`<|system|>\n${messages[0]!.content}\n<|user|>\n${messages[1]!.content}\n<|assistant|>\n`);
    const strs = await post(a, "/tokenize", { prompt: "abcdefgh", return_token_strs: true });
    expect(strs.body.token_strs).toEqual(["abcd", "efgh"]);
  } finally {
    fa.sub.close();
    fb.sub.close();
  }
});

test("eviction publishes BlockRemoved; /reset_prefix_cache publishes AllBlocksCleared", async () => {
  // 24 blocks of 16: two 10-block prompts cannot both stay cached with a third.
  const sim = await startSim(["--num-gpu-blocks", "24", "--max-model-len", "384"]);
  const f = follow(sim);
  try {
    await waitUntil(() => f.sub.stats().connected && f.sub.stats().replayRequests > 0, { what: "subscribed" });
    for (const c of "xyz") expect((await post(sim, "/v1/completions", { model: "m", prompt: c.repeat(4 * 160), max_tokens: 1 })).status).toBe(200);
    await waitUntil(() => f.events.some((e) => e.type === "BlockRemoved"), { what: "BlockRemoved" });
    expect((await post(sim, "/reset_prefix_cache", {})).status).toBe(200);
    await waitUntil(() => f.events.some((e) => e.type === "AllBlocksCleared"), { what: "AllBlocksCleared" });
    const state = (await (await fetch(`${sim.url}/sim/state`)).json()) as { prefix_cache: { cached_blocks: number }; kv_events: { published: number } };
    expect(state.prefix_cache.cached_blocks).toBe(0);
    expect(state.kv_events.published).toBeGreaterThan(2);
  } finally {
    f.sub.close();
  }
});

test("bad tokenize and detokenize bodies get vLLM's 400s and 404s", async () => {
  const sim = await startSim();
  expect((await post(sim, "/tokenize", { model: "nope", prompt: "x" })).status).toBe(404);
  expect((await post(sim, "/tokenize", { prompt: 3 })).status).toBe(400);
  expect((await post(sim, "/tokenize", { messages, add_generation_prompt: true, continue_final_message: true })).status).toBe(400);
  expect((await post(sim, "/detokenize", { tokens: [2 ** 31] })).status).toBe(400);
  expect((await post(sim, "/detokenize", { tokens: "abc" })).status).toBe(400);
  expect((await fetch(`${sim.url}/tokenize`)).status).toBe(405);
  const bad = await post(sim, "/v1/completions", { model: "m", prompt: [1, 2, 2 ** 30 + 5], max_tokens: 1 });
  expect(bad.status).toBe(400);
  expect(String((bad.body.error as { message: string }).message)).toContain("out of vocabulary");
});
