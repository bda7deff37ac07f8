/** The KV-event msgpack codec: vLLM's layouts across versions decode, garbage is refused with a reason, the encoder writes what msgspec writes. */
import { describe, expect, test } from "bun:test";
import { encode } from "@msgpack/msgpack";
import { decodeKvEventBatch } from "../../src/engines/kv-events/decode.ts";
import { encodeKvEventBatch } from "../../src/engines/kv-events/encode.ts";
import { blockHashKey, blockStored, blockTokens, type KvEventBatch } from "../../src/engines/kv-events/model.ts";
import { CURRENT_VLLM, ENCODED_TAGGED_ARRAY, ENCODED_TAGGED_MAP, FUTURE_VLLM, LEGACY_VLLM, MAP_BATCH } from "../fixtures/kv-events/msgspec-payloads.ts";

const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");
const mp = (value: unknown): Uint8Array => encode(value);

function decoded(payload: Uint8Array) {
  const r = decodeKvEventBatch(payload);
  if (!r.ok) throw new Error(`expected a batch, got: ${r.error}`);
  return r;
}

describe("decoding vLLM's layouts", () => {
  test("recent vLLM: tagged maps, a hash above 2^63 exact, a negative one, group and spec fields", () => {
    const { batch, unknownEvents } = decoded(CURRENT_VLLM);
    expect(unknownEvents).toBe(0);
    expect(batch.ts).toBe(1789095808.8378847);
    expect(batch.dataParallelRank).toBe(0);
    const tokens = Array.from({ length: 16 }, (_, i) => 151640 + i);
    expect(batch.events).toEqual([
      {
        type: "BlockStored",
        blockHashes: [15760518052499183552n, 7n],
        parentBlockHash: null,
        tokenIds: [...tokens, ...tokens],
        blockSize: 16,
        loraId: null,
        medium: "GPU",
        loraName: null,
        extraKeys: [null, null],
        groupIdx: 0,
        kvCacheSpecKind: "full_attention",
        kvCacheSpecSlidingWindow: null,
      },
      { type: "BlockRemoved", blockHashes: [-5n], medium: "GPU", groupIdx: 0 },
      { type: "AllBlocksCleared" },
    ]);
  });

  test("vLLM 0.9: tagged arrays, fields it did not have yet read as null, no rank", () => {
    const { batch } = decoded(LEGACY_VLLM);
    expect(batch).toEqual({
      ts: 1750000000.25,
      dataParallelRank: null,
      events: [
        blockStored({ blockHashes: [42n], parentBlockHash: null, tokenIds: [1, 2, 3, 4], blockSize: 4, medium: null }),
        { type: "BlockRemoved", blockHashes: [42n], medium: null, groupIdx: null },
        { type: "AllBlocksCleared" },
      ],
    });
  });

  test("bytes hashes, unknown fields and event types skipped, extra batch fields ignored", () => {
    const { batch, unknownEvents } = decoded(FUTURE_VLLM);
    expect(unknownEvents).toBe(1);
    expect(batch.dataParallelRank).toBe(3);
    const b1 = Uint8Array.from({ length: 32 }, (_, i) => i);
    const b2 = Uint8Array.from({ length: 32 }, (_, i) => 32 + i);
    expect(batch.events).toEqual([
      {
        type: "BlockStored",
        blockHashes: [b2],
        parentBlockHash: b1,
        tokenIds: [9, 9],
        blockSize: 2,
        loraId: 3,
        medium: "CPU",
        loraName: "sql-lora",
        extraKeys: [[{ type: "lora", name: "sql-lora" }]],
        groupIdx: 1,
        kvCacheSpecKind: "sliding_window",
        kvCacheSpecSlidingWindow: 4096,
      },
      { type: "BlockRemoved", blockHashes: [b2], medium: "CPU", groupIdx: null },
    ]);
    // Hashes are copies: the payload buffer is not kept alive by an index that holds them.
    const first = batch.events[0]!;
    const hash = first.type === "BlockStored" ? first.blockHashes[0] : undefined;
    expect(hash instanceof Uint8Array && hash.buffer.byteLength).toBe(32);
  });

  test("a batch written as a map", () => {
    expect(decoded(MAP_BATCH).batch).toEqual({ ts: 1700000000, events: [{ type: "AllBlocksCleared" }], dataParallelRank: 1 });
  });
});

describe("garbage is refused with a reason, never thrown", () => {
  const stored = (...fields: unknown[]): unknown[] => [1, [["BlockStored", ...fields]]];
  const cases: Array<[string, Uint8Array]> = [
    ["empty", new Uint8Array(0)],
    ["a never-used msgpack byte", Uint8Array.of(0xc1)],
    ["truncated", CURRENT_VLLM.subarray(0, CURRENT_VLLM.length - 5)],
    ["bytes after the batch", Uint8Array.of(...LEGACY_VLLM, 0)],
    ["a string instead of a batch", mp("abc")],
    ["ts a string", mp(["x", []])],
    ["ts infinite", mp([Infinity, []])],
    ["events not an array", mp([1, 1])],
    ["an event with an integer tag", mp([1, [[1]]])],
    ["an event that is a number", mp([1, [1]])],
    ["a map event without a type", mp([1, [{ block_hashes: [] }]])],
    ["BlockStored without token_ids", mp([1, [["BlockStored", []]]])],
    ["BlockStored as a map without block_size", mp([1, [{ type: "BlockStored", block_hashes: [], token_ids: [] }]])],
    ["token ids as strings", mp(stored([], null, ["x"], 1))],
    ["a negative token id", mp(stored([], null, [-1], 1))],
    ["block size 0", mp(stored([], null, [], 0))],
    ["a fractional hash", mp(stored([1.5], null, [], 1))],
    ["a string hash", mp(stored(["ab"], null, [], 1))],
    ["lora_name a number", mp(stored([], null, [], 1, null, "GPU", 5))],
    ["extra_keys a string", mp(stored([], null, [], 1, null, "GPU", null, "k"))],
    ["BlockRemoved with medium a number", mp([1, [["BlockRemoved", [], 3]]])],
    ["data_parallel_rank a string", mp([1, [], "0"])],
    ["an array header claiming 2^32-1 elements", Uint8Array.of(0xdd, 0xff, 0xff, 0xff, 0xff, 0)],
    ["a str header claiming 4 GiB", Uint8Array.of(0xdb, 0xff, 0xff, 0xff, 0xff, 0x61)],
    ["a __proto__ key", Uint8Array.of(0x81, 0xa9, ...new TextEncoder().encode("__proto__"), 1)],
  ];
  for (const [what, payload] of cases) {
    test(what, () => {
      const r = decodeKvEventBatch(payload);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error.length).toBeGreaterThan(0);
    });
  }

  test("nesting 100,000 deep in an opaque field is refused without exhausting the stack", () => {
    // [1, [["BlockStored", [], null, [], 1, null, "GPU", null, <extra_keys>]]] with extra_keys [[[…null…]]]
    const prefix = mp(stored([], null, [], 1, null, "GPU", null, null));
    const deep = new Uint8Array([...prefix.subarray(0, prefix.length - 1), ...new Uint8Array(100_000).fill(0x91), 0xc0]);
    const r = decodeKvEventBatch(deep);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toContain("too deep");
  });

  test("random bytes never throw", () => {
    let seed = 12345;
    const rand = (): number => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) & 0xff;
    for (let i = 0; i < 2000; i++) {
      const len = 1 + (rand() % 64);
      const buf = Uint8Array.from({ length: len }, rand);
      expect(() => decodeKvEventBatch(buf)).not.toThrow();
      // Also mutations of a real payload, which get past the first bytes.
      const mutated = CURRENT_VLLM.slice();
      mutated[rand() % mutated.length] = rand();
      expect(() => decodeKvEventBatch(mutated)).not.toThrow();
    }
  });
});

describe("encoding as msgspec does", () => {
  const encodeSample: KvEventBatch = {
    ts: 1700000000,
    dataParallelRank: 0,
    events: [
      blockStored({ blockHashes: [2n ** 64n - 1n, 1n], parentBlockHash: 3n, tokenIds: [1, 2], blockSize: 1 }),
      { type: "BlockRemoved", blockHashes: [1n], medium: "GPU", groupIdx: null },
    ],
  };

  test("byte for byte what python-msgpack writes for the same values, in both layouts (ts an integral float64)", () => {
    expect(hex(encodeKvEventBatch(encodeSample, "tagged-map"))).toBe(hex(ENCODED_TAGGED_MAP));
    expect(hex(encodeKvEventBatch(encodeSample, "tagged-array"))).toBe(hex(ENCODED_TAGGED_ARRAY));
  });

  test("round trips in both layouts, rank omitted when null, defaulted fields kept when set", () => {
    const batch: KvEventBatch = {
      ts: 1.5,
      dataParallelRank: null,
      events: [
        blockStored({
          blockHashes: [new Uint8Array([1, 2, 3])],
          parentBlockHash: -(2n ** 63n),
          tokenIds: [5, 6],
          blockSize: 2,
          loraId: 7,
          loraName: "a",
          groupIdx: 2,
          kvCacheSpecKind: "full_attention",
          kvCacheSpecSlidingWindow: 128,
          extraKeys: [["salt"]],
        }),
        { type: "AllBlocksCleared" },
      ],
    };
    for (const layout of ["tagged-map", "tagged-array"] as const) {
      const wire = encodeKvEventBatch(batch, layout);
      expect(wire[0]).toBe(0x92);
      expect(decoded(wire).batch).toEqual(batch);
    }
  });

  test("a hash outside 64 bits or a non-finite ts is refused at the publisher", () => {
    const bad = (blockHashes: bigint[]): KvEventBatch => ({
      ts: 1,
      dataParallelRank: 0,
      events: [{ type: "BlockRemoved", blockHashes, medium: null, groupIdx: null }],
    });
    expect(() => encodeKvEventBatch(bad([2n ** 64n]))).toThrow(RangeError);
    expect(() => encodeKvEventBatch(bad([-(2n ** 63n) - 1n]))).toThrow(RangeError);
    expect(() => encodeKvEventBatch({ ts: NaN, events: [], dataParallelRank: 0 })).toThrow(RangeError);
  });
});

describe("helpers for an index", () => {
  test("blockTokens cuts tokens per block, or says it cannot", () => {
    expect(blockTokens(blockStored({ blockHashes: [1n, 2n], parentBlockHash: null, tokenIds: [1, 2, 3, 4], blockSize: 2 }))).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(blockTokens(blockStored({ blockHashes: [1n, 2n], parentBlockHash: null, tokenIds: [], blockSize: 2, medium: "CPU" }))).toBeUndefined();
    expect(blockTokens(blockStored({ blockHashes: [1n], parentBlockHash: null, tokenIds: [1, 2, 3], blockSize: 2 }))).toBeUndefined();
  });

  test("blockHashKey keeps ints and bytes apart", () => {
    expect(blockHashKey(1n)).toBe("i1");
    expect(blockHashKey(new Uint8Array([1]))).toBe("b\x01");
    // One character per byte, every byte value distinct.
    const all = new Uint8Array(256).map((_, i) => i);
    expect(blockHashKey(all).length).toBe(257);
    expect(blockHashKey(new Uint8Array([0xff, 0x00]))).not.toBe(blockHashKey(new Uint8Array([0xfe, 0x00])));
    expect(blockHashKey(2n ** 64n - 1n)).toBe("i18446744073709551615");
  });
});
