/**
 * The simulated paged KV cache: a fixed pool of blocks with reference
 * counts, and a prefix cache in the manner of vLLM's BlockPool
 * (vllm/v1/core/block_pool.py): full prompt blocks are known by a chained
 * hash, blocks no request holds stay cached until evicted. Free blocks,
 * cached or not, wait in one queue, least recently freed first, and a new
 * block is always its head (FreeKVCacheBlockQueue): a cached one is evicted
 * then. A request's blocks are freed tail-first, as
 * SingleTypeKVCacheManager.free does, so eviction eats a cached prefix from
 * its end and the head of the prefix stays usable.
 *
 * With events on, it records what vLLM's BlockPool queues for its KV-event
 * publisher: a BlockStored per run of blocks a request caches (their
 * hashes, the hash of the block before them, their token ids, the
 * request's LoRA adapter, lora_id and lora_name, when it names one, each
 * block's extra hash keys, and the one KV-cache group a full-attention
 * model has, group 0 of kind full_attention), a BlockRemoved per cached
 * block evicted for reuse, and AllBlocksCleared when the prefix cache is
 * reset. The engine drains them once per step.
 */
import { blockStored, type KvCacheEvent } from "../engines/kv-events/model.ts";

/**
 * Block j's extra hash keys as vLLM lists them in its events
 * (kv_cache_utils.generate_block_hash_extra_keys): the LoRA adapter's name
 * on every block, the cache_salt on the first; null when it has none.
 */
function blockExtraKeys(j: number, lora: string | undefined, salt: string | undefined): string[] | null {
  const keys: string[] = [];
  if (lora !== undefined) keys.push(lora);
  if (j === 0 && salt !== undefined) keys.push(salt);
  return keys.length > 0 ? keys : null;
}

interface PromptAllocation {
  blocks: number[];
  /** Leading blocks found in the prefix cache. */
  hitBlocks: number;
}

export class KvCache {
  readonly numBlocks: number;
  readonly blockSize: number;
  private readonly refCount: Int32Array;
  private readonly blockHash: (bigint | undefined)[];
  private readonly byHash = new Map<bigint, number>();
  /** Every free block, cached or not, least recently freed first (a Map keeps insertion order). */
  private readonly freeQueue = new Map<number, true>();
  private usedBlocks = 0;
  /** Events since the last drain; undefined when events are off. */
  private events: KvCacheEvent[] | undefined;

  constructor(numBlocks: number, blockSize: number, opts: { events?: boolean } = {}) {
    this.numBlocks = numBlocks;
    this.blockSize = blockSize;
    this.refCount = new Int32Array(numBlocks);
    this.blockHash = new Array<bigint | undefined>(numBlocks).fill(undefined);
    for (let b = 0; b < numBlocks; b++) this.freeQueue.set(b, true);
    if (opts.events) this.events = [];
  }

  /** Blocks held by at least one request. */
  get used(): number {
    return this.usedBlocks;
  }

  get free(): number {
    return this.freeQueue.size;
  }

  /** Blocks in the prefix cache (held or free). */
  get cached(): number {
    return this.byHash.size;
  }

  /** Fraction of blocks held, 0..1 (vLLM's kv_cache_usage_perc). */
  get usage(): number {
    return this.numBlocks === 0 ? 0 : this.usedBlocks / this.numBlocks;
  }

  /** Blocks needed to hold `tokens` tokens. */
  blocksFor(tokens: number): number {
    return Math.ceil(tokens / this.blockSize);
  }

  /** The events recorded since the last call (empty when none, or events are off). */
  takeEvents(): KvCacheEvent[] {
    const out = this.events;
    if (out === undefined || out.length === 0) return [];
    this.events = [];
    return out;
  }

  /**
   * Take `totalBlocks` blocks for a prompt whose full blocks hash to
   * `hashes`, reusing at most `maxHitBlocks` leading cached ones. Null (and
   * nothing taken) when the free blocks do not suffice.
   */
  allocatePrompt(hashes: readonly bigint[], totalBlocks: number, maxHitBlocks: number): PromptAllocation | null {
    const hits = this.lookupPrefix(hashes, Math.min(maxHitBlocks, totalBlocks));
    const blocks = this.allocateAfter(hits, totalBlocks - hits.length);
    if (!blocks) return null;
    for (let j = hits.length; j < blocks.length; j++) {
      const h = hashes[j];
      if (h !== undefined) this.register(blocks[j]!, h);
    }
    return { blocks, hitBlocks: hits.length };
  }

  /** The leading cached blocks of a prompt whose full blocks hash to `hashes` (at most `maxHitBlocks`); nothing is taken. */
  lookupPrefix(hashes: readonly bigint[], maxHitBlocks: number): number[] {
    const hits: number[] = [];
    const limit = Math.min(hashes.length, maxHitBlocks);
    for (let j = 0; j < limit; j++) {
      const b = this.byHash.get(hashes[j]!);
      if (b === undefined) break;
      hits.push(b);
    }
    return hits;
  }

  /** Take the prefix hits plus `newBlocks` fresh blocks; null (and nothing taken) when the free blocks do not suffice. */
  allocateAfter(hits: readonly number[], newBlocks: number): number[] | null {
    let hitsFree = 0;
    for (const b of hits) if (this.refCount[b] === 0) hitsFree++;
    if (newBlocks > this.free - hitsFree) return null;
    const blocks: number[] = [];
    for (const b of hits) {
      this.ref(b);
      blocks.push(b);
    }
    for (let k = 0; k < newBlocks; k++) {
      const b = this.takeFree();
      this.ref(b);
      blocks.push(b);
    }
    return blocks;
  }

  /**
   * A block filled with computed prompt tokens joins the prefix cache under
   * its chained hash (vLLM caches a block once it is full and computed,
   * block_pool.cache_full_blocks); a hash already cached keeps its block.
   * True when the block was cached now.
   */
  register(block: number, hash: bigint): boolean {
    if (this.byHash.has(hash) || this.blockHash[block] !== undefined) return false;
    this.byHash.set(hash, block);
    this.blockHash[block] = hash;
    return true;
  }

  /**
   * Cache a request's blocks `from`..`to`-1 (its `blocks`, whose full-block
   * hashes are `hashes` and tokens `ids`), as cache_full_blocks does, with
   * one BlockStored per run of blocks cached now (a block whose hash another
   * block already holds is skipped, and splits the run).
   */
  registerRun(
    blocks: readonly number[],
    hashes: readonly bigint[],
    ids: Int32Array,
    from: number,
    to: number,
    lora?: { readonly id: number; readonly name: string },
    salt?: string,
  ): void {
    let runStart = -1;
    const flush = (end: number) => {
      if (runStart < 0) return;
      if (this.events) {
        const bs = this.blockSize;
        this.events.push(
          blockStored({
            blockHashes: hashes.slice(runStart, end),
            parentBlockHash: runStart > 0 ? hashes[runStart - 1]! : null,
            tokenIds: Array.from(ids.subarray(runStart * bs, end * bs)),
            blockSize: bs,
            // vLLM names the request's adapter on its blocks (their hashes are keyed by it).
            ...(lora ? { loraId: lora.id, loraName: lora.name } : {}),
            extraKeys: hashes.slice(runStart, end).map((_, k) => blockExtraKeys(runStart + k, lora?.name, salt)),
            groupIdx: 0,
            kvCacheSpecKind: "full_attention",
          }),
        );
      }
      runStart = -1;
    };
    for (let j = from; j < to; j++) {
      if (this.register(blocks[j]!, hashes[j]!)) {
        if (runStart < 0) runStart = j;
      } else flush(j);
    }
    flush(to);
  }

  /** One more block for a growing sequence; -1 when none is free. */
  grow(): number {
    if (this.free === 0) return -1;
    const b = this.takeFree();
    this.ref(b);
    return b;
  }

  /**
   * Give back a request's blocks (in sequence order). They join the free
   * queue last block first: the tail of a prefix is evicted before its
   * head, which a later request can still hit.
   */
  release(blocks: readonly number[]): void {
    for (let i = blocks.length - 1; i >= 0; i--) {
      const b = blocks[i]!;
      const n = --this.refCount[b]!;
      if (n > 0) continue;
      this.usedBlocks--;
      this.freeQueue.set(b, true);
    }
  }

  /**
   * vLLM's reset_prefix_cache: forget every cached block, and say so with
   * AllBlocksCleared. Refused (false, nothing changed) while any block is
   * held by a request, as vLLM refuses it.
   */
  resetPrefixCache(): boolean {
    if (this.usedBlocks > 0) return false;
    for (const b of this.freeQueue.keys()) this.blockHash[b] = undefined;
    this.byHash.clear();
    this.events?.push({ type: "AllBlocksCleared" });
    return true;
  }

  private ref(b: number): void {
    if (this.refCount[b] === 0) {
      this.usedBlocks++;
      this.freeQueue.delete(b);
    }
    this.refCount[b]!++;
  }

  /** The head of the free queue (the least recently freed block), evicting what it caches. */
  private takeFree(): number {
    const oldest = this.freeQueue.keys().next();
    if (oldest.done) throw new Error("KvCache: no free block (caller must check free first)");
    const b = oldest.value;
    this.freeQueue.delete(b);
    const h = this.blockHash[b];
    if (h !== undefined && this.byHash.get(h) === b) {
      this.byHash.delete(h);
      this.events?.push({ type: "BlockRemoved", blockHashes: [h], medium: "GPU", groupIdx: 0 });
    }
    this.blockHash[b] = undefined;
    return b;
  }
}
