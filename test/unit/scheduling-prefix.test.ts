import { describe, expect, test } from "bun:test";
import { prefixHashes, promptText, requestPrefixHashes } from "../../src/scheduling/prefix-hash.ts";
import { PrefixIndex } from "../../src/scheduling/prefix-index.ts";

describe("prefixHashes", () => {
  test("hashes only full leading blocks, at most maxBlocks, as safe integers", () => {
    const text = "a".repeat(10) + "b".repeat(10) + "c".repeat(5);
    const h = prefixHashes(text, 10, 16);
    expect(h).toHaveLength(2);
    for (const v of h) expect(Number.isSafeInteger(v) && v >= 0).toBe(true);
    expect(prefixHashes(text, 10, 1)).toEqual([h[0]!]);
    expect(prefixHashes("short", 10, 4)).toEqual([]);
  });

  test("chained: a shared prefix shares hashes, one changed block changes every hash after it", () => {
    const base = "x".repeat(8) + "y".repeat(8) + "z".repeat(8);
    const a = prefixHashes(base, 8, 8);
    const b = prefixHashes("x".repeat(8) + "Y".repeat(8) + "z".repeat(8), 8, 8);
    expect(b[0]).toBe(a[0]!);
    expect(b[1]).not.toBe(a[1]!);
    expect(b[2]).not.toBe(a[2]!); // same third block, different history
    // Same block content at a different position hashes differently.
    const same = prefixHashes("q".repeat(16), 8, 2);
    expect(same[0]).not.toBe(same[1]!);
  });

  test("a LoRA adapter's name salts the chain: another adapter, or the base model, is another prefix; the same adapter the same one", () => {
    const t = "The quick brown fox jumps over the lazy dog. ".repeat(20);
    const base = prefixHashes(t, 32, 8);
    const sql = prefixHashes(t, 32, 8, "sql");
    const chat = prefixHashes(t, 32, 8, "chat");
    expect(sql).toHaveLength(base.length);
    expect(prefixHashes(t, 32, 8, "sql")).toEqual(sql);
    for (let i = 0; i < base.length; i++) {
      expect(Number.isSafeInteger(sql[i]!) && sql[i]! >= 0).toBe(true);
      expect(sql[i]).not.toBe(base[i]!);
      expect(sql[i]).not.toBe(chat[i]!);
    }
  });

  test("deterministic across calls", () => {
    const t = "The quick brown fox jumps over the lazy dog. ".repeat(20);
    expect(prefixHashes(t, 32, 8)).toEqual(prefixHashes(t, 32, 8));
  });

  test("degenerate options give no hashes instead of throwing", () => {
    expect(prefixHashes("abcdef", 0, 4)).toEqual([]);
    expect(prefixHashes("abcdef", 2, 0)).toEqual([]);
  });
});

describe("promptText", () => {
  test("chat: role markers, string and text-part content, other parts as markers with their URL", () => {
    const body = {
      model: "m",
      messages: [
        { role: "system", content: "be brief" },
        {
          role: "user",
          content: [
            { type: "text", text: "look: " },
            { type: "image_url", image_url: { url: "http://x/1.png" } },
          ],
        },
        { role: "assistant", content: null, tool_calls: [] },
      ],
    };
    expect(promptText(body)).toBe("<|system|>\nbe brief\n<|user|>\nlook: [image_url]http://x/1.png\n<|assistant|>\n\n");
  });

  test("chat: the same words under different roles are different prompts", () => {
    const a = promptText({ messages: [{ role: "user", content: "hi" }] });
    const b = promptText({ messages: [{ role: "system", content: "hi" }] });
    expect(a).not.toBe(b);
  });

  test("completions: string, list of strings, token ids", () => {
    expect(promptText({ prompt: "once upon" })).toBe("once upon");
    expect(promptText({ prompt: ["a", "b"] })).toBe("a\nb");
    expect(promptText({ prompt: [1, 2, 3] })).toBe("1,2,3");
    expect(promptText({ prompt: [[1, 2], [3]] })).toBe("1,2\n3");
  });

  test("anything else yields an empty prompt", () => {
    for (const body of [null, 3, "x", {}, { messages: "no" }, { prompt: { a: 1 } }, { messages: [null, 7] }]) {
      expect(promptText(body)).toBe("");
    }
  });

  test("stops at maxChars, even inside a huge part", () => {
    const huge = "z".repeat(1_000_000);
    const body = {
      messages: [
        { role: "user", content: [{ type: "input_audio", input_audio: { data: huge } }] },
        { role: "user", content: huge },
      ],
    };
    const t = promptText(body, 100);
    expect(t).toHaveLength(100);
    expect(t.startsWith("<|user|>\n[input_audio]zzz")).toBe(true);
  });

  test("requestPrefixHashes reads only what it hashes and agrees with prefixHashes(promptText)", () => {
    const body = { messages: [{ role: "user", content: "w".repeat(5000) }] };
    const opts = { blockChars: 64, maxBlocks: 4 };
    const h = requestPrefixHashes(body, opts);
    expect(h).toHaveLength(4);
    expect(h).toEqual(prefixHashes(promptText(body), 64, 4));
  });
});

describe("PrefixIndex", () => {
  test("matchedBlocks counts the leading blocks last routed to that endpoint", () => {
    const idx = new PrefixIndex(100);
    idx.record([1, 2, 3], 4);
    expect(idx.matchedBlocks([1, 2, 3, 7], 4)).toBe(3);
    expect(idx.matchedBlocks([1, 2, 9], 4)).toBe(2);
    expect(idx.matchedBlocks([5, 6], 4)).toBe(0);
    expect(idx.matchedBlocks([1, 2, 3], 0)).toBe(0);
    expect(idx.matchedBlocks([], 4)).toBe(0);
    idx.record([1], 0); // a shorter request with the same first block goes elsewhere
    expect(idx.matchedBlocks([1, 2, 3], 0)).toBe(1);
    // Chained hashes: hash 3 still stands for blocks 1..3 having gone to endpoint 4.
    expect(idx.matchedBlocks([1, 2, 3], 4)).toBe(3);
  });

  test("the memo follows every change (same array, index updated in between)", () => {
    const idx = new PrefixIndex(100);
    const hashes = [10, 20];
    expect(idx.matchedBlocks(hashes, 1)).toBe(0);
    idx.record(hashes, 1);
    expect(idx.matchedBlocks(hashes, 1)).toBe(2);
    idx.record(hashes, 2);
    expect(idx.matchedBlocks(hashes, 1)).toBe(0);
    expect(idx.matchedBlocks(hashes, 2)).toBe(2);
  });

  test("inserting 10× the cap keeps size ≤ cap and the most recent entries survive", () => {
    const cap = 1000;
    const idx = new PrefixIndex(cap);
    for (let i = 0; i < cap * 10; i++) {
      idx.record([i], i % 7);
      expect(idx.size).toBeLessThanOrEqual(cap);
    }
    expect(idx.size).toBe(cap);
    for (let i = cap * 9; i < cap * 10; i++) expect(idx.matchedBlocks([i], i % 7)).toBe(1);
    for (let i = 0; i < cap * 9; i += 97) expect(idx.matchedBlocks([i], i % 7)).toBe(0);
  });

  test("one record larger than the cap keeps only its newest hashes", () => {
    const idx = new PrefixIndex(16);
    const many = Array.from({ length: 40 }, (_, i) => 1000 + i);
    idx.record(many, 3);
    expect(idx.size).toBe(16);
    expect(idx.matchedBlocks(many, 3)).toBe(40); // the deepest block survives and stands for the prefix
    expect(idx.matchedBlocks(many.slice(0, 24), 3)).toBe(0);
  });

  test("re-recording refreshes recency, so a hot prefix is not evicted", () => {
    const idx = new PrefixIndex(4);
    idx.record([1], 0);
    for (let i = 0; i < 20; i++) {
      idx.record([100 + i], 1);
      idx.record([1], 0);
    }
    expect(idx.matchedBlocks([1], 0)).toBe(1);
  });

  test("forgetEndpoint drops that endpoint's prefixes only, and new routes count again", () => {
    const idx = new PrefixIndex(100);
    idx.record([1, 2], 0);
    idx.record([3, 4], 1);
    idx.forgetEndpoint(0);
    expect(idx.matchedBlocks([1, 2], 0)).toBe(0);
    expect(idx.matchedBlocks([3, 4], 1)).toBe(2);
    idx.record([1, 2], 0);
    expect(idx.matchedBlocks([1, 2], 0)).toBe(2);
  });

  test("rejects an invalid cap or endpoint index", () => {
    expect(() => new PrefixIndex(0)).toThrow(RangeError);
    expect(() => new PrefixIndex(1.5)).toThrow(RangeError);
    const idx = new PrefixIndex(4);
    expect(() => idx.record([1], -1)).toThrow(RangeError);
    expect(() => idx.forgetEndpoint(2 ** 40)).toThrow(RangeError);
  });
});
