/**
 * Encode a KV-event batch as vLLM's msgspec encoder writes it: the batch an
 * array `[ts, events, data_parallel_rank]` (array_like, rank omitted when
 * null), each event a tagged map (recent vLLM) or a tagged array (earlier
 * releases), fields with a default omitted while at it. Pure.
 */
import { Encoder } from "@msgpack/msgpack";
import type { BlockHash, KvCacheEvent, KvEventBatch } from "./model.ts";

/** How events are laid out: `"tagged-map"` as recent vLLM writes them, `"tagged-array"` as releases before it did. */
export type KvEventLayout = "tagged-map" | "tagged-array";

const encoder = new Encoder({ useBigInt64: true });
const INT64_MIN = -(2n ** 63n);
const UINT64_MAX = 2n ** 64n - 1n;

/** Small ints as msgpack's compact forms (as msgspec writes them), large ones as 64-bit. */
function wireHash(h: BlockHash): number | bigint | Uint8Array {
  if (typeof h !== "bigint") return h;
  if (h < INT64_MIN || h > UINT64_MAX) throw new RangeError(`block hash ${h} does not fit 64 bits`);
  return h >= BigInt(Number.MIN_SAFE_INTEGER) && h <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(h) : h;
}

/** msgspec omits only trailing defaults in an array_like struct. */
function trimTrailingNulls(fields: unknown[], keep: number): unknown[] {
  let end = fields.length;
  while (end > keep && fields[end - 1] === null) end--;
  return fields.slice(0, end);
}

function eventValue(e: KvCacheEvent, layout: KvEventLayout): unknown {
  switch (e.type) {
    case "BlockStored": {
      const required: Array<[string, unknown]> = [
        ["block_hashes", e.blockHashes.map(wireHash)],
        ["parent_block_hash", e.parentBlockHash === null ? null : wireHash(e.parentBlockHash)],
        ["token_ids", e.tokenIds],
        ["block_size", e.blockSize],
        ["lora_id", e.loraId],
        ["medium", e.medium],
        ["lora_name", e.loraName],
      ];
      const defaulted: Array<[string, unknown]> = [
        ["extra_keys", e.extraKeys],
        ["group_idx", e.groupIdx],
        ["kv_cache_spec_kind", e.kvCacheSpecKind],
        ["kv_cache_spec_sliding_window", e.kvCacheSpecSlidingWindow],
      ];
      return layoutOf(e.type, required, defaulted, layout);
    }
    case "BlockRemoved":
      return layoutOf(
        e.type,
        [
          ["block_hashes", e.blockHashes.map(wireHash)],
          ["medium", e.medium],
        ],
        [["group_idx", e.groupIdx]],
        layout,
      );
    case "AllBlocksCleared":
      return layoutOf(e.type, [], [], layout);
    default: {
      const never: never = e;
      throw new Error(`unknown event ${JSON.stringify(never)}`);
    }
  }
}

function layoutOf(tag: string, required: Array<[string, unknown]>, defaulted: Array<[string, unknown]>, layout: KvEventLayout): unknown {
  if (layout === "tagged-array") return trimTrailingNulls([tag, ...required.map(([, v]) => v), ...defaulted.map(([, v]) => v)], 1 + required.length);
  const map: Record<string, unknown> = { type: tag };
  for (const [k, v] of required) map[k] = v;
  for (const [k, v] of defaulted) if (v !== null) map[k] = v;
  return map;
}

export function encodeKvEventBatch(batch: KvEventBatch, layout: KvEventLayout = "tagged-map"): Uint8Array {
  if (!Number.isFinite(batch.ts)) throw new RangeError(`ts must be finite, got ${batch.ts}`);
  const events = encoder.encode(batch.events.map((e) => eventValue(e, layout)));
  const rank = batch.dataParallelRank === null ? undefined : encoder.encode(batch.dataParallelRank);
  // ts by hand: msgspec always writes a float as float64 (0xcb), where the
  // library would write an integral number such as 1700000000 as an int.
  const out = new Uint8Array(1 + 9 + events.length + (rank?.length ?? 0));
  out[0] = rank === undefined ? 0x92 : 0x93;
  out[1] = 0xcb;
  new DataView(out.buffer).setFloat64(2, batch.ts);
  out.set(events, 10);
  if (rank !== undefined) out.set(rank, 10 + events.length);
  return out;
}
