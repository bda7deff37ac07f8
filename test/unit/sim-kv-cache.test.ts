import { describe, expect, test } from "bun:test";
import { KvCache } from "../../src/sim/kv-cache.ts";

describe("sim KvCache", () => {
  test("allocates, counts usage and releases", () => {
    const kv = new KvCache(10, 16);
    const a = kv.allocatePrompt([], 3, 0);
    expect(a).not.toBeNull();
    expect(a!.blocks.length).toBe(3);
    expect(kv.used).toBe(3);
    expect(kv.usage).toBeCloseTo(0.3);
    kv.release(a!.blocks);
    expect(kv.used).toBe(0);
    expect(kv.free).toBe(10);
  });

  test("refuses (and takes nothing) when blocks are short", () => {
    const kv = new KvCache(4, 16);
    kv.allocatePrompt([], 3, 0);
    expect(kv.allocatePrompt([], 2, 0)).toBeNull();
    expect(kv.used).toBe(3);
    expect(kv.grow()).toBeGreaterThanOrEqual(0);
    expect(kv.grow()).toBe(-1);
  });

  test("a repeated prefix hits cached blocks, shared while both hold them", () => {
    const kv = new KvCache(10, 16);
    const first = kv.allocatePrompt([1n, 2n], 3, 2)!;
    expect(first.hitBlocks).toBe(0);
    const second = kv.allocatePrompt([1n, 2n], 3, 2)!;
    expect(second.hitBlocks).toBe(2);
    expect(second.blocks.slice(0, 2)).toEqual(first.blocks.slice(0, 2));
    expect(kv.used).toBe(4); // 2 shared + 1 + 1
    kv.release(first.blocks);
    kv.release(second.blocks);
    // Freed but still cached: a third request hits again.
    const third = kv.allocatePrompt([1n, 2n], 3, 2)!;
    expect(third.hitBlocks).toBe(2);
  });

  test("a chain breaks at the first miss and maxHitBlocks caps hits", () => {
    const kv = new KvCache(10, 16);
    kv.release(kv.allocatePrompt([11n, 12n, 13n], 3, 3)!.blocks);
    expect(kv.allocatePrompt([14n, 12n, 13n], 3, 3)!.hitBlocks).toBe(0);
    expect(kv.allocatePrompt([11n, 12n, 13n], 3, 1)!.hitBlocks).toBe(1);
  });

  test("the least recently freed block is taken first, evicting what it cached", () => {
    const kv = new KvCache(3, 16);
    const p1 = kv.allocatePrompt([21n], 1, 1)!;
    const p2 = kv.allocatePrompt([22n], 1, 1)!;
    kv.release(p1.blocks);
    kv.release(p2.blocks);
    const other = kv.allocatePrompt([], 1, 0)!; // takes the never-used block, first in the free queue
    expect(kv.allocatePrompt([21n], 1, 1)!.hitBlocks).toBe(1);
    kv.release(other.blocks);
    // Now p2 (freed) is the only cached free block besides the clean one; fill everything.
    const fill = kv.allocatePrompt([], 2, 0)!;
    expect(fill.blocks.length).toBe(2);
    expect(kv.allocatePrompt([22n], 1, 1)).toBeNull();
    kv.release(fill.blocks);
    expect(kv.allocatePrompt([22n], 1, 1)!.hitBlocks).toBe(0); // evicted
  });
});
