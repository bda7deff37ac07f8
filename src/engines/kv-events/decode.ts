/**
 * Decode a vLLM KV-event payload (msgpack written by msgspec) into the typed
 * model, tolerant of vLLM's layouts and strict about everything else.
 *
 * msgspec writes a Struct with `array_like=True` as an array of its fields in
 * order, and a `tag=True` Struct with its class name as tag: first element of
 * the array, or a `"type"` key of a map when not array_like. `omit_defaults`
 * drops fields still at their default (trailing ones only, in an array).
 * vLLM's generations differ: the batch has always been an array
 * `[ts, events, data_parallel_rank?]` in releases (one development snapshot
 * wrote it as a map), events were tagged arrays and are tagged maps in recent
 * releases, and fields were appended over time (medium, lora_name,
 * extra_keys, group_idx, kv_cache_spec_*, more). So: either shape at either
 * level, missing newer fields read as null, unknown extra fields and unknown
 * event types skipped. A wrong type in a known field, bytes after the
 * message, or anything not msgpack fails the whole batch with a reason,
 * never an exception.
 */
import { Decoder } from "@msgpack/msgpack";
import type { AllBlocksCleared, BlockHash, BlockRemoved, BlockStored, KvCacheEvent, KvEventBatch } from "./model.ts";

type KvBatchDecodeResult =
  | {
      ok: true;
      batch: KvEventBatch;
      /** Events of a type this decoder does not know (a newer vLLM), left out of `batch`. */
      unknownEvents: number;
    }
  | { ok: false; error: string };

/** Nesting allowed inside opaque fields (extra_keys); vLLM's are two or three deep. */
const MAX_OPAQUE_DEPTH = 16;

class BadBatch extends Error {}

function fail(message: string): never {
  throw new BadBatch(message);
}

type Fields = { get(index: number, name: string): unknown; has(index: number, name: string): boolean };

function fieldsOf(value: unknown, what: string): { tag: unknown; fields: Fields } {
  if (Array.isArray(value)) {
    const arr: unknown[] = value;
    return { tag: arr[0], fields: { get: (i) => arr[i], has: (i) => i < arr.length } };
  }
  if (isMap(value)) {
    return { tag: value.type, fields: { get: (_i, n) => (Object.hasOwn(value, n) ? value[n] : undefined), has: (_i, n) => Object.hasOwn(value, n) } };
  }
  return fail(`${what} is neither an array nor a map`);
}

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

function int(v: unknown, name: string): number {
  if (typeof v === "number" && Number.isSafeInteger(v)) return v;
  if (typeof v === "bigint" && v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(v);
  return fail(`${name} is not an integer`);
}

function intOrNull(v: unknown, name: string): number | null {
  return v === undefined || v === null ? null : int(v, name);
}

function strOrNull(v: unknown, name: string): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v === "string") return v;
  return fail(`${name} is not a string`);
}

function hash(v: unknown, name: string): BlockHash {
  if (typeof v === "bigint") return v;
  if (typeof v === "number" && Number.isSafeInteger(v)) return BigInt(v);
  // A copy: a view would keep the whole payload alive as long as the hash.
  if (v instanceof Uint8Array) return v.slice();
  return fail(`${name} is not an integer or bytes`);
}

function hashList(v: unknown, name: string): BlockHash[] {
  if (!Array.isArray(v)) return fail(`${name} is not an array`);
  return v.map((h: unknown) => hash(h, name));
}

function tokenList(v: unknown): number[] {
  if (!Array.isArray(v)) return fail("token_ids is not an array");
  const out = new Array<number>(v.length);
  for (let i = 0; i < v.length; i++) {
    const t: unknown = v[i];
    if (typeof t !== "number" || !Number.isSafeInteger(t) || t < 0) return fail("token_ids holds something other than a non-negative integer");
    out[i] = t;
  }
  return out;
}

/** A deep copy with bytes detached from the payload; bounded in depth. */
function opaque(v: unknown, depth: number): unknown {
  if (depth > MAX_OPAQUE_DEPTH) return fail("extra_keys nested too deep");
  if (v instanceof Uint8Array) return v.slice();
  if (Array.isArray(v)) return v.map((x: unknown) => opaque(x, depth + 1));
  if (isMap(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, opaque(x, depth + 1)]));
  return v;
}

function blockStored(f: Fields): BlockStored {
  for (const [i, n] of [
    [1, "block_hashes"],
    [3, "token_ids"],
    [4, "block_size"],
  ] as const)
    if (!f.has(i, n)) fail(`BlockStored without ${n}`);
  const blockSize = int(f.get(4, "block_size"), "block_size");
  if (blockSize <= 0) fail("block_size is not positive");
  const extra = f.get(8, "extra_keys");
  if (extra !== undefined && extra !== null && !Array.isArray(extra)) fail("extra_keys is not an array");
  const parent = f.get(2, "parent_block_hash");
  return {
    type: "BlockStored",
    blockHashes: hashList(f.get(1, "block_hashes"), "block_hashes"),
    parentBlockHash: parent === undefined || parent === null ? null : hash(parent, "parent_block_hash"),
    tokenIds: tokenList(f.get(3, "token_ids")),
    blockSize,
    loraId: intOrNull(f.get(5, "lora_id"), "lora_id"),
    medium: strOrNull(f.get(6, "medium"), "medium"),
    loraName: strOrNull(f.get(7, "lora_name"), "lora_name"),
    extraKeys: Array.isArray(extra) ? (opaque(extra, 0) as unknown[]) : null,
    groupIdx: intOrNull(f.get(9, "group_idx"), "group_idx"),
    kvCacheSpecKind: strOrNull(f.get(10, "kv_cache_spec_kind"), "kv_cache_spec_kind"),
    kvCacheSpecSlidingWindow: intOrNull(f.get(11, "kv_cache_spec_sliding_window"), "kv_cache_spec_sliding_window"),
  };
}

function blockRemoved(f: Fields): BlockRemoved {
  if (!f.has(1, "block_hashes")) fail("BlockRemoved without block_hashes");
  return {
    type: "BlockRemoved",
    blockHashes: hashList(f.get(1, "block_hashes"), "block_hashes"),
    medium: strOrNull(f.get(2, "medium"), "medium"),
    groupIdx: intOrNull(f.get(3, "group_idx"), "group_idx"),
  };
}

const CLEARED: AllBlocksCleared = Object.freeze({ type: "AllBlocksCleared" });

/** The event, or undefined for a well-formed event of a type not known here. */
function event(value: unknown): KvCacheEvent | undefined {
  const { tag, fields } = fieldsOf(value, "an event");
  if (typeof tag !== "string") return fail("an event without a string tag");
  switch (tag) {
    case "BlockStored":
      return blockStored(fields);
    case "BlockRemoved":
      return blockRemoved(fields);
    case "AllBlocksCleared":
      return CLEARED;
    default:
      return undefined;
  }
}

function batch(value: unknown): { batch: KvEventBatch; unknownEvents: number } {
  let ts: unknown;
  let events: unknown;
  let rank: unknown;
  if (Array.isArray(value)) [ts, events, rank] = value as unknown[];
  else if (isMap(value)) ({ ts, events, data_parallel_rank: rank } = value);
  else fail("the batch is neither an array nor a map");
  if (typeof ts !== "number" || !Number.isFinite(ts)) fail("ts is not a number");
  if (!Array.isArray(events)) fail("events is not an array");
  const out: KvCacheEvent[] = [];
  let unknownEvents = 0;
  for (const e of events as unknown[]) {
    const decoded = event(e);
    if (decoded === undefined) unknownEvents++;
    else out.push(decoded);
  }
  return { batch: { ts, events: out, dataParallelRank: intOrNull(rank, "data_parallel_rank") }, unknownEvents };
}

export function decodeKvEventBatch(payload: Uint8Array): KvBatchDecodeResult {
  // No length in the message can be larger than the message itself.
  const limit = payload.length;
  const decoder = new Decoder({ useBigInt64: true, maxStrLength: limit, maxBinLength: limit, maxArrayLength: limit, maxMapLength: limit, maxExtLength: limit });
  let value: unknown;
  try {
    value = decoder.decode(payload);
  } catch (err) {
    return { ok: false, error: `not msgpack: ${err instanceof Error ? err.message : String(err)}` };
  }
  try {
    return { ok: true, ...batch(value) };
  } catch (err) {
    if (err instanceof BadBatch || err instanceof RangeError) return { ok: false, error: err.message };
    throw err;
  }
}
