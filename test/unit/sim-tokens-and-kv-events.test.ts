/** The sim's token ids (one definition for /tokenize, the prefix cache and KV events) and the events its KV cache records. */
import { describe, expect, test } from "bun:test";
import type { BlockStored } from "../../src/engines/kv-events/model.ts";
import { EngineCore } from "../../src/sim/engine-core.ts";
import { KvCache } from "../../src/sim/kv-cache.ts";
import { parseKvEventsConfig } from "../../src/sim/kv-events-config.ts";
import { NO_FRONTEND } from "../../src/sim/step-time.ts";
import { SimOutput } from "../../src/sim/text-model.ts";
import { blockHashChain, renderChat, textPrompt, textTokenIds, tokenText, WORD_BASE } from "../../src/sim/tokens.ts";

const detok = (ids: ArrayLike<number>) => Array.from(ids, (id) => tokenText(id)).join("");

describe("sim token ids", () => {
  test("four characters a token, the same ids for the same text, ASCII text given back whole", () => {
    const text = "The quick brown fox jumps over the lazy dog.";
    const ids = textTokenIds(text);
    expect(ids.length).toBe(Math.ceil(text.length / 4));
    expect(Array.from(textTokenIds(text))).toEqual(Array.from(ids));
    expect(detok(ids)).toBe(text);
    // A shared head gives shared ids; a different one different ids.
    expect(Array.from(textTokenIds(text + " And more.").subarray(0, 11))).toEqual(Array.from(ids));
    expect(textTokenIds("abcd")[0]).not.toBe(textTokenIds("abce")[0]);
  });

  test("a token with a non-ASCII character gets a hashed id, detokenized as U+FFFD", () => {
    const ids = textTokenIds("naïve café");
    expect(ids.length).toBe(3);
    expect(ids[0]).toBeGreaterThanOrEqual(2 ** 28);
    expect(ids[0]).toBeLessThan(2 ** 29);
    expect(ids[1]).toBeLessThan(2 ** 28);
    expect(Array.from(textTokenIds("naïve café"))).toEqual(Array.from(ids));
    expect(detok(ids)).toBe("\uFFFDe ca\uFFFD"); // "naïv" and "fé" hashed, "e ca" packed
    expect(tokenText(-1)).toBeUndefined();
    expect(tokenText(WORD_BASE + 10_000)).toBeUndefined();
  });

  test("continued words are one token each, with the word's id", () => {
    const chat = renderChat([{ role: "user", content: "Tell me something" }]);
    const p = textPrompt(chat, 16);
    const delivered = new SimOutput(p.state).text(5);
    const c = textPrompt(chat + delivered, 16);
    expect(c.count).toBe(p.count + 5);
    const words = Array.from(c.ids.subarray(p.count));
    expect(words.every((id) => id >= WORD_BASE)).toBe(true);
    expect(detok(c.ids)).toBe(chat + delivered);
  });

  test("block hashes chain over ids from a root: same root same hashes, another root other hashes", () => {
    const ids = textTokenIds("x".repeat(64 * 3 + 10));
    const a = blockHashChain(ids, 16, 7n);
    expect(a.length).toBe(3);
    expect(blockHashChain(ids, 16, 7n)).toEqual(a);
    expect(blockHashChain(ids, 16, 8n)[0]).not.toBe(a[0]);
    // Chained: equal ids in block 1 under a different block 0 hash differently.
    expect(a[1]).not.toBe(a[0]);
  });
});

describe("sim KV cache events", () => {
  const ids = Int32Array.from({ length: 12 }, (_, i) => i + 100);

  test("stored blocks name the one KV-cache group of a full-attention model and each block's extra keys, as vLLM's events do", () => {
    const kv = new KvCache(8, 4, { events: true });
    kv.registerRun(kv.allocateAfter([], 2)!, [1n, 2n], ids, 0, 2);
    expect(kv.takeEvents()).toMatchObject([{ groupIdx: 0, kvCacheSpecKind: "full_attention", extraKeys: [null, null] }]);
    // A salted request's first block carries its salt; an adapter's name is on every block, first in the list.
    kv.registerRun(kv.allocateAfter([], 2)!, [3n, 4n], ids, 0, 2, undefined, "tenant-a");
    expect((kv.takeEvents() as BlockStored[])[0]!.extraKeys).toEqual([["tenant-a"], null]);
    kv.registerRun(kv.allocateAfter([], 2)!, [5n, 6n], ids, 0, 2, { id: 1, name: "sql" }, "tenant-a");
    expect((kv.takeEvents() as BlockStored[])[0]!.extraKeys).toEqual([["sql", "tenant-a"], ["sql"]]);
  });

  test("a run of newly cached blocks is one BlockStored with its parent and tokens; a hash already cached splits the run", () => {
    const kv = new KvCache(8, 4, { events: true });
    const hashes = [1n, 2n, 3n];
    const blocks = kv.allocateAfter([], 3)!;
    kv.registerRun(blocks, hashes, ids, 0, 1);
    kv.registerRun(blocks, hashes, ids, 1, 3);
    const [first, second] = kv.takeEvents() as BlockStored[];
    expect(first).toMatchObject({ type: "BlockStored", blockHashes: [1n], parentBlockHash: null, tokenIds: [100, 101, 102, 103], blockSize: 4, medium: "GPU" });
    expect(second).toMatchObject({ blockHashes: [2n, 3n], parentBlockHash: 1n, tokenIds: Array.from(ids.subarray(4, 12)) });
    expect(kv.takeEvents()).toEqual([]);
    // Another request's blocks with hash 2 already cached: only 1' and 3' are new, in two runs.
    const other = kv.allocateAfter([], 3)!;
    kv.registerRun(other, [9n, 2n, 10n], ids, 0, 3);
    expect((kv.takeEvents() as BlockStored[]).map((e) => [e.blockHashes, e.parentBlockHash])).toEqual([
      [[9n], null],
      [[10n], 2n],
    ]);
  });

  test("evicting a cached block for reuse is a BlockRemoved; a reset is AllBlocksCleared, refused while blocks are held", () => {
    const kv = new KvCache(2, 4, { events: true });
    const a = kv.allocateAfter([], 2)!;
    kv.registerRun(a, [1n, 2n], ids, 0, 2);
    kv.takeEvents();
    expect(kv.resetPrefixCache()).toBe(false);
    expect(kv.takeEvents()).toEqual([]);
    kv.release(a);
    const b = kv.grow();
    expect(b).toBeGreaterThanOrEqual(0);
    // The chain's tail block is freed first, so it is the first evicted (vLLM frees a request's blocks in reverse).
    expect(kv.takeEvents()).toEqual([{ type: "BlockRemoved", blockHashes: [2n], medium: "GPU", groupIdx: 0 }]);
    kv.release([b]);
    expect(kv.resetPrefixCache()).toBe(true);
    expect(kv.takeEvents()).toEqual([{ type: "AllBlocksCleared" }]);
    expect(kv.cached).toBe(0);
    expect(kv.lookupPrefix([2n], 1)).toEqual([]);
  });

  test("events off: nothing is recorded", () => {
    const kv = new KvCache(2, 4);
    kv.registerRun(kv.allocateAfter([], 1)!, [1n], ids, 0, 1);
    expect(kv.takeEvents()).toEqual([]);
  });

  test("the engine core stores a prompt's full blocks with the prompt's own ids, block by block as its chunks compute", () => {
    const core = new EngineCore(
      { maxNumSeqs: 4, maxNumBatchedTokens: 32, numGpuBlocks: 64, blockSize: 16, maxModelLen: 1024, kvEvents: true },
      {
        timing: { derived: undefined, derivedScale: 1, flatDecode: { itlMs: 1, batchSlowdown: 0, maxNumSeqs: 4 }, flatPrefill: { msPerToken: 0 } },
        jitter: 0,
        frontendJitterMs: 0,
        frontend: NO_FRONTEND,
        firstTokenDelayMs: 0,
      },
    );
    const prompt = textPrompt("y".repeat(4 * 70), 16, undefined, 42n);
    let done = false;
    core.submit(
      {
        prompt,
        outputTokens: 2,
        finishReason: "length",
        stallAfter: -1,
        cutAfter: -1,
        intervalMs: 0,
        sink: { token() {}, finish: () => (done = true), cut() {} },
      },
      0,
    );
    const stored: BlockStored[] = [];
    for (let i = 0; i < 100 && !done; i++) {
      core.advance(core.nextEventAt());
      for (const e of core.kv.takeEvents()) if (e.type === "BlockStored") stored.push(e);
    }
    // 70 tokens: 4 full blocks, computed in chunks of 32 tokens (2 blocks per step).
    expect(stored.map((e) => e.blockHashes.length)).toEqual([2, 2]);
    expect(stored.flatMap((e) => e.blockHashes)).toEqual(prompt.blockHashes);
    expect(stored[1]!.parentBlockHash).toBe(prompt.blockHashes[1]!);
    expect(stored.flatMap((e) => e.tokenIds)).toEqual(Array.from(prompt.ids.subarray(0, 64)));
  });
});

describe("--kv-events-config", () => {
  test("vLLM's keys and defaults; disabled or the null publisher publish nothing", () => {
    expect(parseKvEventsConfig('{"enable_kv_cache_events":true}')).toEqual({
      endpoint: "tcp://*:5557",
      connect: false,
      replayEndpoint: undefined,
      bufferSteps: 10_000,
      hwm: 100_000,
      topic: "",
    });
    expect(
      parseKvEventsConfig(
        '{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:0","replay_endpoint":"tcp://*:0","topic":"kv@a@m","buffer_steps":5}',
      ),
    ).toMatchObject({ replayEndpoint: "tcp://*:0", topic: "kv@a@m", bufferSteps: 5 });
    expect(parseKvEventsConfig("{}")).toBeUndefined();
    expect(parseKvEventsConfig('{"enable_kv_cache_events":true,"publisher":"null"}')).toBeUndefined();
  });

  test("as vLLM: a wildcard endpoint binds, one that names a host connects", () => {
    const on = (endpoint: string) => parseKvEventsConfig(JSON.stringify({ enable_kv_cache_events: true, endpoint }))?.connect;
    expect(on("tcp://*:5557")).toBe(false);
    expect(on("tcp://[::]:5557")).toBe(false);
    expect(on("tcp://10.0.0.1:5557")).toBe(true);
    expect(on("tcp://router.llm-d.svc:5557")).toBe(true);
    // A connection needs the port of the SUB it connects to.
    expect(() => on("tcp://10.0.0.1:0")).toThrow(/endpoint: .*port/);
  });

  test("bad values name the key", () => {
    expect(() => parseKvEventsConfig("nope")).toThrow(/not JSON/);
    expect(() => parseKvEventsConfig('{"enable_kv_cache_events":true,"bogus":1}')).toThrow(/bogus/);
    expect(() => parseKvEventsConfig('{"enable_kv_cache_events":true,"buffer_steps":0}')).toThrow(/buffer_steps/);
    expect(() => parseKvEventsConfig('{"enable_kv_cache_events":true,"endpoint":"ipc://*"}')).toThrow(/tcp/);
  });
});
