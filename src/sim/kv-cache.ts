/**
 * The simulated paged KV cache: a fixed pool of blocks with reference
 * counts, and a prefix cache in the manner of vLLM's BlockPool
 * (vllm/v1/core/block_pool.py): full prompt blocks are known by a chained
 * hash, blocks no request holds stay cached until evicted, oldest-freed
 * first (LRU). Blocks without a hash are reused before any cached one.
 */

export interface PromptAllocation {
  blocks: number[];
  /** Leading blocks found in the prefix cache. */
  hitBlocks: number;
}

export class KvCache {
  readonly numBlocks: number;
  readonly blockSize: number;
  private readonly refCount: Int32Array;
  private readonly blockHash: (string | undefined)[];
  private readonly byHash = new Map<string, number>();
  /** Free blocks that still hold a cached prefix, oldest-freed first (Map keeps insertion order). */
  private readonly freeCached = new Map<number, true>();
  /** Free blocks with nothing cached in them. */
  private readonly freeClean: number[] = [];
  private usedBlocks = 0;

  constructor(numBlocks: number, blockSize: number) {
    this.numBlocks = numBlocks;
    this.blockSize = blockSize;
    this.refCount = new Int32Array(numBlocks);
    this.blockHash = new Array<string | undefined>(numBlocks).fill(undefined);
    for (let b = numBlocks - 1; b >= 0; b--) this.freeClean.push(b);
  }

  /** Blocks held by at least one request. */
  get used(): number {
    return this.usedBlocks;
  }

  get free(): number {
    return this.freeClean.length + this.freeCached.size;
  }

  /** Fraction of blocks held, 0..1 (vLLM's kv_cache_usage_perc). */
  get usage(): number {
    return this.numBlocks === 0 ? 0 : this.usedBlocks / this.numBlocks;
  }

  /** Blocks needed to hold `tokens` tokens. */
  blocksFor(tokens: number): number {
    return Math.ceil(tokens / this.blockSize);
  }

  /**
   * Take `totalBlocks` blocks for a prompt whose full blocks hash to
   * `hashes`, reusing at most `maxHitBlocks` leading cached ones. Null (and
   * nothing taken) when the free blocks do not suffice.
   */
  allocatePrompt(hashes: readonly string[], totalBlocks: number, maxHitBlocks: number): PromptAllocation | null {
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
  lookupPrefix(hashes: readonly string[], maxHitBlocks: number): number[] {
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
   */
  register(block: number, hash: string): void {
    if (this.byHash.has(hash) || this.blockHash[block] !== undefined) return;
    this.byHash.set(hash, block);
    this.blockHash[block] = hash;
  }

  /** One more block for a growing sequence; -1 when none is free. */
  grow(): number {
    if (this.free === 0) return -1;
    const b = this.takeFree();
    this.ref(b);
    return b;
  }

  release(blocks: readonly number[]): void {
    for (const b of blocks) {
      const n = --this.refCount[b]!;
      if (n > 0) continue;
      this.usedBlocks--;
      if (this.blockHash[b] !== undefined) this.freeCached.set(b, true);
      else this.freeClean.push(b);
    }
  }

  private ref(b: number): void {
    if (this.refCount[b] === 0) {
      this.usedBlocks++;
      this.freeCached.delete(b);
    }
    this.refCount[b]!++;
  }

  /** A free block: a clean one if any, else evict the least recently freed cached one. */
  private takeFree(): number {
    const clean = this.freeClean.pop();
    if (clean !== undefined) return clean;
    const oldest = this.freeCached.keys().next();
    if (oldest.done) throw new Error("KvCache: no free block (caller must check free first)");
    const b = oldest.value;
    this.freeCached.delete(b);
    const h = this.blockHash[b];
    if (h !== undefined && this.byHash.get(h) === b) this.byHash.delete(h);
    this.blockHash[b] = undefined;
    return b;
  }
}
