/**
 * vLLM's KV-cache events as typed data (vllm/distributed/kv_events.py:
 * KVEventBatch, BlockStored, BlockRemoved, AllBlocksCleared), with the wire's
 * snake_case fields in camelCase. Pure.
 */

/**
 * A block hash as the engine publishes it: an integer (the 64-bit builtin
 * and `sha256_cbor_64bit` algorithms; it can exceed 2^53, so always a
 * bigint here) or bytes (`sha256`, `sha256_cbor`).
 */
export type BlockHash = bigint | Uint8Array;

export interface BlockStored {
  type: "BlockStored";
  blockHashes: BlockHash[];
  parentBlockHash: BlockHash | null;
  /**
   * The tokens of all the blocks, `blockSize` per block, in order. May be
   * empty (events from KV offloading carry no tokens): see `blockTokens`.
   */
  tokenIds: number[];
  blockSize: number;
  /** Deprecated by vLLM in favour of `loraName`; still on the wire. */
  loraId: number | null;
  /** "GPU", "CPU"…; null from engines older than the field. */
  medium: string | null;
  loraName: string | null;
  /** Opaque per-block extra hash keys (multi-modal ids, salts, LoRA), as decoded. */
  extraKeys: unknown[] | null;
  /** The KV-cache group (hybrid attention models); null means the only one. */
  groupIdx: number | null;
  kvCacheSpecKind: string | null;
  kvCacheSpecSlidingWindow: number | null;
}

export interface BlockRemoved {
  type: "BlockRemoved";
  blockHashes: BlockHash[];
  medium: string | null;
  groupIdx: number | null;
}

export interface AllBlocksCleared {
  type: "AllBlocksCleared";
}

export type KvCacheEvent = BlockStored | BlockRemoved | AllBlocksCleared;

export interface KvEventBatch {
  /** Seconds since the epoch, as the engine's clock read it (`time.time()`). */
  ts: number;
  events: KvCacheEvent[];
  /** The data-parallel rank that published it; null when the engine sent none. */
  dataParallelRank: number | null;
}

/** A BlockStored with the optional fields at their wire defaults, for publishers and tests. */
export function blockStored(fields: Pick<BlockStored, "blockHashes" | "parentBlockHash" | "tokenIds" | "blockSize"> & Partial<BlockStored>): BlockStored {
  return {
    loraId: null,
    medium: "GPU",
    loraName: null,
    extraKeys: null,
    groupIdx: null,
    kvCacheSpecKind: null,
    kvCacheSpecSlidingWindow: null,
    ...fields,
    type: "BlockStored",
  };
}

/** A string fit for a Map key: ints and bytes never collide ("i…" vs "b…"); bytes as latin1, one character each (hex would double every key the worker holds). */
export function blockHashKey(hash: BlockHash): string {
  return typeof hash === "bigint" ? `i${hash.toString()}` : `b${Buffer.from(hash.buffer, hash.byteOffset, hash.length).toString("latin1")}`;
}

/**
 * The event's tokens cut into its blocks (one array per block hash), or
 * undefined when the tokens do not cover the blocks exactly (an offloading
 * event with no tokens, or an engine that sent something else): an index
 * keyed by tokens must skip such an event rather than guess.
 */
export function blockTokens(event: BlockStored): number[][] | undefined {
  const { blockHashes, tokenIds, blockSize } = event;
  if (blockHashes.length === 0 || tokenIds.length !== blockHashes.length * blockSize) return undefined;
  const out: number[][] = [];
  for (let i = 0; i < blockHashes.length; i++) out.push(tokenIds.slice(i * blockSize, (i + 1) * blockSize));
  return out;
}
