/** The KV-events worker's index of what each engine holds: keyed by tokens (not the engine's hashes), bounded, dropped on a reset. */
import { describe, expect, test } from "bun:test";
import { type BlockHash, blockStored, type KvCacheEvent } from "../../src/engines/kv-events/model.ts";
import { KvBlockTracker } from "../../src/polling/kv-block-tracker.ts";
import { KvBlockIndex } from "../../src/scheduling/kv-block-index.ts";
import { tokenBlockKeys } from "../../src/scheduling/token-blocks.ts";
import { KV_COUNTER, KV_STREAM, KvEventStats } from "../../src/shared/kv-event-stats.ts";

const tokens = (seed: number, n: number) => Array.from({ length: n }, (_, i) => seed * 1000 + i);
const batch = (events: KvCacheEvent[]) => ({ ts: 1, events, dataParallelRank: 0 });

function setup(capacity = 1024) {
  const stats = new KvEventStats(8);
  for (const s of [0, 1, 2]) stats.setState(s, KV_STREAM.LIVE);
  const index = new KvBlockIndex(capacity, stats);
  return { stats, index, tracker: new KvBlockTracker(index, stats) };
}

/** BlockStored of `ids` cut into 16-token blocks, hashed the engine's way (here: any distinct numbers), chained from `parent`. */
function stored(ids: number[], hashes: BlockHash[], parent: BlockHash | null, blockSize = 16) {
  return blockStored({ blockHashes: hashes, parentBlockHash: parent, tokenIds: ids, blockSize });
}

describe("KvBlockTracker", () => {
  test("blocks stored over several events, parents by hash, are found by the request's own token keys; two engines' different hashes agree", () => {
    const { index, tracker } = setup();
    const prompt = tokens(1, 64);
    tracker.apply(0, batch([stored(prompt.slice(0, 32), [101n, 102n], null)]));
    tracker.apply(0, batch([stored(prompt.slice(32, 64), [103n, 104n], 102n)]));
    // Another engine, another hash algorithm (bytes), the same tokens in one event.
    tracker.apply(1, batch([stored(prompt.slice(0, 48), [new Uint8Array([1]), new Uint8Array([2]), new Uint8Array([3])], null)]));
    const keys = tokenBlockKeys([...prompt, 7, 7, 7]);
    expect(index.matchedBlocks(keys, 0)).toBe(4);
    expect(index.matchedBlocks(keys, 1)).toBe(3);
    expect(index.matchedBlocks(keys, 2)).toBe(0);
    expect(tracker.blocksOf(0)).toBe(4);
  });

  test("BlockRemoved takes a block out (a prefix stops there); a hash stored twice leaves at its second removal", () => {
    const { index, tracker, stats } = setup();
    const prompt = tokens(2, 48);
    tracker.apply(0, batch([stored(prompt, [1n, 2n, 3n], null), stored(prompt.slice(16, 32), [2n], 1n)]));
    const keys = tokenBlockKeys(prompt);
    tracker.apply(0, batch([{ type: "BlockRemoved", blockHashes: [2n], medium: "GPU", groupIdx: null }]));
    expect(index.matchedBlocks(keys, 0)).toBe(3); // one copy of block 2 is left
    tracker.apply(0, batch([{ type: "BlockRemoved", blockHashes: [2n, 99n], medium: "GPU", groupIdx: null }]));
    expect(index.matchedBlocks(keys, 0)).toBe(1);
    expect(stats.blocks(0)).toBe(2);
    expect(stats.counter(0, KV_COUNTER.BLOCK_STORED)).toBe(2);
    expect(stats.counter(0, KV_COUNTER.BLOCK_REMOVED)).toBe(2);
  });

  test("a block size of 32 is two keys per block; unknown parents, LoRA, offloaded and token-less blocks are skipped and counted", () => {
    const { index, tracker, stats } = setup();
    const prompt = tokens(3, 64);
    tracker.apply(0, batch([stored(prompt, [1n, 2n], null, 32)]));
    expect(index.matchedBlocks(tokenBlockKeys(prompt), 0)).toBe(4);
    tracker.apply(1, batch([stored(prompt.slice(0, 16), [5n], 777n)])); // parent never seen
    tracker.apply(1, batch([blockStored({ blockHashes: [6n], parentBlockHash: null, tokenIds: prompt.slice(0, 16), blockSize: 16, loraName: "sql" })]));
    tracker.apply(1, batch([blockStored({ blockHashes: [7n], parentBlockHash: null, tokenIds: [], blockSize: 16, medium: "CPU" })]));
    tracker.apply(1, batch([stored(prompt.slice(0, 8), [8n], null, 8)]));
    expect(index.matchedBlocks(tokenBlockKeys(prompt), 1)).toBe(0);
    expect(stats.counter(1, KV_COUNTER.SKIPPED)).toBe(4);
  });

  test("AllBlocksCleared and a reset drop the endpoint's index (and say why); the other endpoints keep theirs", () => {
    const { index, tracker, stats } = setup();
    const prompt = tokens(4, 32);
    const keys = tokenBlockKeys(prompt);
    for (const s of [0, 1]) tracker.apply(s, batch([stored(prompt, [1n, 2n], null)]));
    tracker.apply(0, batch([{ type: "AllBlocksCleared" }]));
    expect(index.matchedBlocks(keys, 0)).toBe(0);
    expect(index.matchedBlocks(keys, 1)).toBe(2);
    tracker.drop(1, "publisher-restarted");
    expect(index.matchedBlocks(keys, 1)).toBe(0);
    expect(stats.drops(0, "all-blocks-cleared")).toBe(1);
    expect(stats.drops(1, "publisher-restarted")).toBe(1);
    expect(index.size).toBe(0);
    // Stored again after the drop: indexed again from the root.
    tracker.apply(1, batch([stored(prompt, [1n, 2n], null)]));
    expect(index.matchedBlocks(keys, 1)).toBe(2);
  });

  test("bounded: at the ceiling the endpoint holding the most lets its oldest blocks go, and memory stays at the ceiling", () => {
    const { index, tracker, stats } = setup(1024);
    // Endpoint 1 holds a little; endpoint 0 stores far more than fits.
    tracker.apply(
      1,
      batch([
        stored(
          tokens(9, 160),
          Array.from({ length: 10 }, (_, i) => BigInt(900 + i)),
          null,
        ),
      ]),
    );
    const prompts = Array.from({ length: 40 }, (_, p) => tokens(100 + p, 16 * 32));
    prompts.forEach((ids, p) =>
      tracker.apply(
        0,
        batch([
          stored(
            ids,
            Array.from({ length: 32 }, (_, i) => BigInt(p * 100 + i)),
            null,
          ),
        ]),
      ),
    );
    expect(index.size).toBe(1024);
    expect(stats.blocks(0) + stats.blocks(1)).toBe(1024);
    expect(stats.counter(0, KV_COUNTER.EVICTED)).toBe(40 * 32 + 10 - 1024);
    // The newest prompts are whole, the oldest gone, endpoint 1 untouched.
    expect(index.matchedBlocks(tokenBlockKeys(prompts[39]!), 0)).toBe(32);
    expect(index.matchedBlocks(tokenBlockKeys(prompts[0]!), 0)).toBe(0);
    expect(index.matchedBlocks(tokenBlockKeys(tokens(9, 160)), 1)).toBe(10);
  });
});
