/** Block hashes become the worker's map keys: one longer than any engine's (vLLM: a 64-bit int or a 32-byte sha256) is refused with its event, so a publisher cannot grow the gateway with them. */
import { describe, expect, test } from "bun:test";
import { blockStored, type KvCacheEvent } from "../../src/engines/kv-events/model.ts";
import { KvBlockTracker, MAX_BLOCK_HASH_BYTES } from "../../src/polling/kv-block-tracker.ts";
import { KvBlockIndex } from "../../src/scheduling/kv-block-index.ts";
import { tokenBlockKeys } from "../../src/scheduling/token-blocks.ts";
import { KV_STREAM, KvEventStats } from "../../src/shared/kv-event-stats.ts";

const tokens = (seed: number, n: number) => Array.from({ length: n }, (_, i) => seed * 100_000 + i);
const batch = (events: KvCacheEvent[]) => ({ ts: 1, events, dataParallelRank: 0 });
const bytes = (n: number, fill: number) => new Uint8Array(n).fill(fill);

function setup() {
  const stats = new KvEventStats(4);
  stats.setState(0, KV_STREAM.LIVE);
  const index = new KvBlockIndex(4096, stats);
  const told: string[] = [];
  return { stats, index, tracker: new KvBlockTracker(index, stats, (_slot, reason) => told.push(reason)), told };
}

describe("the KV-block index refuses over-long block hashes", () => {
  test("960 blocks with 200 KB hashes: every event refused (hash-length), nothing indexed; sha256-sized and 64-bit hashes are indexed", () => {
    const { stats, index, tracker, told } = setup();
    for (let e = 0; e < 60; e++) {
      const hs = Array.from({ length: 16 }, (_, i) => bytes(200 * 1024, (e * 16 + i) % 251));
      tracker.apply(0, batch([blockStored({ blockHashes: hs, parentBlockHash: null, tokenIds: tokens(e, 16 * 16), blockSize: 16 })]));
    }
    expect(stats.rejected(0, "hash-length")).toBe(60);
    expect(told.length).toBe(60);
    expect(tracker.blocksOf(0)).toBe(0);
    expect(index.size).toBe(0);

    const ids = tokens(99, 16 * 3);
    tracker.apply(
      0,
      batch([blockStored({ blockHashes: [bytes(32, 1), bytes(MAX_BLOCK_HASH_BYTES, 2)], parentBlockHash: null, tokenIds: ids.slice(0, 32), blockSize: 16 })]),
    );
    tracker.apply(
      0,
      batch([blockStored({ blockHashes: [-(2n ** 63n)], parentBlockHash: bytes(MAX_BLOCK_HASH_BYTES, 2), tokenIds: ids.slice(32), blockSize: 16 })]),
    );
    expect(index.matchedBlocks(tokenBlockKeys(ids), 0)).toBe(3);
    expect(stats.rejected(0, "hash-length")).toBe(60);
  });

  test("an over-long parent hash refuses the BlockStored; an over-long hash in a BlockRemoved refuses it and removes nothing", () => {
    const { stats, tracker } = setup();
    const ids = tokens(7, 32);
    tracker.apply(
      0,
      batch([blockStored({ blockHashes: [1n], parentBlockHash: bytes(MAX_BLOCK_HASH_BYTES + 1, 3), tokenIds: ids.slice(0, 16), blockSize: 16 })]),
    );
    expect(stats.rejected(0, "hash-length")).toBe(1);
    tracker.apply(0, batch([blockStored({ blockHashes: [1n, 2n], parentBlockHash: null, tokenIds: ids, blockSize: 16 })]));
    tracker.apply(0, batch([{ type: "BlockRemoved", blockHashes: [1n, bytes(MAX_BLOCK_HASH_BYTES + 1, 4)], medium: "GPU", groupIdx: null }]));
    expect(stats.rejected(0, "hash-length")).toBe(2);
    expect(tracker.blocksOf(0)).toBe(2);
  });
});
