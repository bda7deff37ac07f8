/** Eviction under pressure eats a cached prefix from its tail, as vLLM frees a request's blocks (tail first), so the head stays usable. */
import { describe, expect, test } from "bun:test";
import { KvCache } from "../../src/sim/kv-cache.ts";
import { textPrompt } from "../../src/sim/tokens.ts";
import { runOne, simCore, simRequest } from "../helpers/sim-core.ts";

describe("sim prefix cache eviction order", () => {
  test("the cache: 2 blocks evicted from a freed 8-block prefix leave its first 6 blocks", () => {
    const kv = new KvCache(8, 16);
    const hashes = [1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n];
    const a = kv.allocatePrompt(hashes, 8, 8)!;
    kv.release(a.blocks);
    // Pressure: two blocks for someone else must come out of the cached prefix.
    kv.allocatePrompt([], 2, 0);
    expect(kv.lookupPrefix(hashes, 8)).toEqual(a.blocks.slice(0, 6));
  });

  test("the engine core: a request with an 8-block cached prefix, 2 of its blocks evicted, hits 6 blocks", () => {
    const core = simCore({ numGpuBlocks: 9, blockSize: 16 });
    // 8 full blocks and 4 tokens more: 9 blocks, the last one never cached.
    const shared = textPrompt("x".repeat(4 * (8 * 16 + 4)), 16, undefined, 7n);
    expect(shared.blockHashes.length).toBe(8);
    const first = runOne(core, simRequest(shared, 1));
    expect(first.cachedTokens).toBe(0);
    expect(core.kv.cached).toBe(8);
    // Another prompt takes 3 blocks of the 9: the free partial block and two cached ones.
    runOne(core, simRequest(textPrompt("z".repeat(4 * 40), 16, undefined, 7n), 1));
    const again = runOne(core, simRequest(shared, 1));
    expect(again.cachedTokens).toBe(6 * 16);
  });
});
