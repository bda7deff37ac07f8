/** Scorer precise-prefix and the KV-block index it reads: the fraction of the request's blocks an engine holds, longest prefix first; the estimate where no live stream says. */
import { describe, expect, test } from "bun:test";
import { KvBlockIndex } from "../../src/scheduling/kv-block-index.ts";
import { SCORERS } from "../../src/scheduling/plugin-registry.ts";
import { PrefixIndex } from "../../src/scheduling/prefix-index.ts";
import { INDEX_BLOCK_TOKENS, nextTokenKey, TOKEN_KEY_ROOT, tokenBlockKeys } from "../../src/scheduling/token-blocks.ts";
import { KV_STREAM, KvEventStats } from "../../src/shared/kv-event-stats.ts";
import { endpoint, kvIndexWith, schedulingContext } from "../helpers/scheduling.ts";

const s = SCORERS["precise-prefix"];
const fleet = [endpoint(0), endpoint(1), endpoint(2)];

describe("token-block keys", () => {
  test("chained per 16 tokens: a shared head gives shared keys, one token changed changes every key after it", () => {
    const ids = Array.from({ length: 70 }, (_, i) => i * 7);
    const keys = tokenBlockKeys(ids);
    expect(keys.length).toBe(4);
    expect(tokenBlockKeys(ids.slice(0, 40))).toEqual(keys.slice(0, 2));
    const other = [...ids];
    other[20] = 1;
    const k2 = tokenBlockKeys(other);
    expect(k2[0]).toBe(keys[0]!);
    expect(k2[1]).not.toBe(keys[1]!);
    expect(k2[2]).not.toBe(keys[2]!);
    expect(nextTokenKey(TOKEN_KEY_ROOT, ids, 0)).toBe(keys[0]!);
    expect(nextTokenKey(keys[0]!, ids, INDEX_BLOCK_TOKENS)).toBe(keys[1]!);
    for (const k of keys) expect(Number.isSafeInteger(k)).toBe(true);
    expect(tokenBlockKeys(ids, 2)).toEqual(keys.slice(0, 2));
  });
});

describe("precise-prefix", () => {
  test("a live endpoint scores the fraction of the request's blocks it holds, counted from the first and stopping at a hole", () => {
    // 0 holds all four; 1 holds blocks 1..3 but not 0 (nothing usable); 2 holds 0, 1 and 3 (a hole at 2).
    const ctx = schedulingContext(new PrefixIndex(64), kvIndexWith({ 0: [1, 2, 3, 4], 1: [2, 3, 4], 2: [1, 2, 4] }));
    expect(s.score({ model: "m", prefixHashes: [], tokenBlockKeys: [1, 2, 3, 4] }, fleet, ctx)).toEqual([1, 0, 0.5]);
  });

  test("an endpoint whose stream is not live gets the estimate; without token ids every endpoint does", () => {
    const prefix = new PrefixIndex(64);
    prefix.record([11, 12], 1);
    const ctx = schedulingContext(prefix, kvIndexWith({ 0: [1, 2], 1: [1, 2] }, [0]));
    expect(s.score({ model: "m", prefixHashes: [11, 12], tokenBlockKeys: [1, 2] }, fleet, ctx)).toEqual([1, 1, 0]);
    expect(s.score({ model: "m", prefixHashes: [11, 12] }, fleet, ctx)).toEqual([0, 1, 0]);
    expect(s.score({ model: "m", prefixHashes: [] }, fleet, ctx)).toEqual([0, 0, 0]);
  });

  test("with several gateways the stand-in is rendezvous hashing, the same answer everywhere", () => {
    const ctx = schedulingContext(new PrefixIndex(64), kvIndexWith({}), "prefix-rendezvous");
    const scores = s.score({ model: "m", prefixHashes: [42, 43] }, fleet, ctx);
    expect(scores).toEqual(SCORERS["prefix-rendezvous"].score({ model: "m", prefixHashes: [42, 43] }, fleet, ctx));
    expect(scores.filter((x) => x === 1).length).toBe(1);
  });
});

describe("KV-block index", () => {
  test("insert, remove and match; a write makes the readers' memo stale; an emptied chain matches nothing", () => {
    const stats = new KvEventStats(8);
    stats.setState(3, KV_STREAM.LIVE);
    const index = new KvBlockIndex(16, stats);
    const reader = new KvBlockIndex(16, stats, index.buffer);
    const entries = index.write(() => [10, 20, 30].map((k) => index.insert(k, 3)));
    const keys = [10, 20, 30];
    expect(reader.matchedBlocks(keys, 3)).toBe(3);
    expect(reader.live(3)).toBe(true);
    expect(reader.live(4)).toBe(false);
    index.write(() => index.remove(entries[1]!));
    expect(reader.matchedBlocks(keys, 3)).toBe(1);
    index.write(() => index.remove(entries[1]!)); // twice: nothing happens
    expect(index.size).toBe(2);
    index.write(() => {
      index.remove(entries[0]!);
      index.remove(entries[2]!);
    });
    expect(reader.matchedBlocks(keys, 3)).toBe(0);
    expect(index.size).toBe(0);
  });

  test("bounded: at its capacity there is no room until an entry is removed; freed entries are reused", () => {
    const index = new KvBlockIndex(4, new KvEventStats(2));
    const entries = index.write(() => [1, 2, 3, 4].map((k) => index.insert(k, 0)));
    expect(index.hasRoom()).toBe(false);
    expect(() => index.write(() => index.insert(5, 0))).toThrow(/full/);
    index.write(() => index.remove(entries[2]!));
    expect(index.hasRoom()).toBe(true);
    expect(index.write(() => index.insert(6, 1))).toBe(entries[2]!);
    expect(index.matchedBlocks([6], 1)).toBe(1);
  });

  test("many keys in few buckets: colliding chains still match exactly (capacity 2, 100 entries over time)", () => {
    const index = new KvBlockIndex(8, new KvEventStats(2));
    for (let round = 0; round < 25; round++) {
      const keys = [round * 4 + 1, round * 4 + 2, round * 4 + 3, round * 4 + 4];
      const es = index.write(() => keys.map((k) => index.insert(k, round % 2)));
      expect(index.matchedBlocks(keys, round % 2)).toBe(4);
      expect(index.matchedBlocks(keys, 1 - (round % 2))).toBe(0);
      index.write(() => es.forEach((e) => index.remove(e)));
    }
    expect(index.size).toBe(0);
  });
});
