/** One BlockStored bigger than the index can take is refused whole: the other engines keep their blocks, the index holds no orphan entry, and they can fill it afterwards. */
import { describe, expect, test } from "bun:test";
import { type BlockHash, blockStored, type KvCacheEvent } from "../../src/engines/kv-events/model.ts";
import { KvBlockTracker } from "../../src/polling/kv-block-tracker.ts";
import { KvBlockIndex } from "../../src/scheduling/kv-block-index.ts";
import { tokenBlockKeys } from "../../src/scheduling/token-blocks.ts";
import { KV_COUNTER, KV_STREAM, type KvEventRejectReason, KvEventStats } from "../../src/shared/kv-event-stats.ts";

const CAPACITY = 1024;
const tokens = (seed: number, n: number) => Array.from({ length: n }, (_, i) => seed * 100_000 + i);
const batch = (events: KvCacheEvent[]) => ({ ts: 1, events, dataParallelRank: 0 });
const stored = (ids: number[], hashes: BlockHash[], parent: BlockHash | null, blockSize = 16) =>
  blockStored({ blockHashes: hashes, parentBlockHash: parent, tokenIds: ids, blockSize });
const hashes = (from: number, n: number) => Array.from({ length: n }, (_, i) => BigInt(from + i));

function setup() {
  const stats = new KvEventStats(8);
  for (const s of [0, 1, 2]) stats.setState(s, KV_STREAM.LIVE);
  const index = new KvBlockIndex(CAPACITY, stats);
  const told: { slot: number; reason: KvEventRejectReason; detail: string }[] = [];
  const tracker = new KvBlockTracker(index, stats, (slot, reason, detail) => told.push({ slot, reason, detail }));
  return { stats, index, tracker, told };
}

describe("the KV-block index refuses an oversized BlockStored and stays whole", () => {
  test("one block of (capacity + 1) × 16 tokens: refused, counted and reported; the good engines' blocks stay and new ones are indexed", () => {
    const { stats, index, tracker, told } = setup();
    const good = tokens(1, 16 * 100);
    tracker.apply(0, batch([stored(good, hashes(1, 100), null)]));
    tracker.apply(1, batch([stored(good, hashes(1, 100), null)]));
    expect(index.size).toBe(200);

    tracker.apply(2, batch([stored(tokens(2, (CAPACITY + 1) * 16), [7n], null, (CAPACITY + 1) * 16)]));
    expect(stats.rejected(2, "oversized")).toBe(1);
    expect(told).toEqual([{ slot: 2, reason: "oversized", detail: expect.stringContaining("index entries") }]);
    expect(tracker.blocksOf(2)).toBe(0);
    expect(index.size).toBe(200); // nothing written, nothing let go
    expect(stats.counter(0, KV_COUNTER.EVICTED) + stats.counter(1, KV_COUNTER.EVICTED)).toBe(0);
    expect(index.matchedBlocks(tokenBlockKeys(good), 0)).toBe(100);
    expect(index.matchedBlocks(tokenBlockKeys(good), 1)).toBe(100);

    // The good engines go on storing, up to the whole ceiling.
    for (let p = 0; p < 20; p++) tracker.apply(p % 2, batch([stored(tokens(10 + p, 16 * 100), hashes(1000 * (p + 2), 100), null)]));
    expect(index.size).toBe(CAPACITY);
    expect(tracker.blocksOf(0) + tracker.blocksOf(1)).toBe(CAPACITY);
    const newest = tokens(29, 16 * 100);
    expect(index.matchedBlocks(tokenBlockKeys(newest), 1)).toBe(100);
  });

  test("after a reset the index is empty and the good engines can fill it again: no orphan entry holds room", () => {
    const { index, tracker, stats } = setup();
    tracker.apply(2, batch([stored(tokens(3, 16 * 200), hashes(1, 200), null)]));
    tracker.apply(2, batch([stored(tokens(4, (CAPACITY + 1) * 16), [9n], 200n, (CAPACITY + 1) * 16)]));
    tracker.drop(2, "publisher-restarted");
    expect(index.size).toBe(0);
    for (let p = 0; p < 11; p++) tracker.apply(0, batch([stored(tokens(20 + p, 16 * 100), hashes(1000 * (p + 1), 100), null)]));
    expect(tracker.blocksOf(0)).toBe(CAPACITY);
    expect(stats.blocks(0)).toBe(CAPACITY);
  });

  test("the largest event allowed (a quarter of the index) into a full index: others' oldest blocks go, the event is indexed whole", () => {
    const { index, tracker, stats } = setup();
    for (let p = 0; p < 8; p++) tracker.apply(p % 2, batch([stored(tokens(40 + p, 16 * 128), hashes(1000 * (p + 1), 128), null)]));
    expect(index.size).toBe(CAPACITY);
    const big = tokens(60, (CAPACITY / 4) * 16);
    tracker.apply(2, batch([stored(big, [1n, 2n], null, (CAPACITY / 8) * 16)]));
    expect(stats.rejected(2, "oversized")).toBe(0);
    expect(index.size).toBe(CAPACITY);
    expect(index.matchedBlocks(tokenBlockKeys(big), 2)).toBe(CAPACITY / 4);
    expect(stats.blocks(0) + stats.blocks(1) + stats.blocks(2)).toBe(CAPACITY);
    // One entry more than a quarter is refused.
    tracker.apply(2, batch([stored(tokens(61, (CAPACITY / 4 + 1) * 16), [3n], null, (CAPACITY / 4 + 1) * 16)]));
    expect(stats.rejected(2, "oversized")).toBe(1);
  });

  test("token ids that are not block_size per block are refused (token-count); no token ids at all is an offloading event, skipped", () => {
    const { index, tracker, stats } = setup();
    tracker.apply(0, batch([stored(tokens(5, 16 * 3 + 1), hashes(1, 3), null)]));
    tracker.apply(0, batch([stored(tokens(5, 16), hashes(10, 3), null)]));
    expect(stats.rejected(0, "token-count")).toBe(2);
    tracker.apply(0, batch([stored([], hashes(20, 3), null)]));
    expect(stats.counter(0, KV_COUNTER.SKIPPED)).toBe(3);
    expect(index.size).toBe(0);
  });
});
