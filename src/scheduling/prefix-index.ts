/**
 * The prefix-affinity index: block hash → the endpoint that block was last
 * routed to, as an LRU with a hard cap on entries. Bounded on purpose: a
 * tree of every prefix ever seen grows until the process runs out of memory.
 */
import type { PrefixIndexReader } from "./types.ts";

/**
 * Endpoint rows the index can address. A stored value packs the endpoint
 * index with the endpoint's generation (bumped by forgetEndpoint) as
 * generation × MAX_ENDPOINTS + index, exact in a double up to 2^33 forgets.
 */
export const PREFIX_INDEX_MAX_ENDPOINTS = 1 << 20;

export class PrefixIndex implements PrefixIndexReader {
  /** hash → packed (generation, endpoint); Map keeps insertion order, which is our LRU order. */
  private readonly entries = new Map<number, number>();
  /** Per-endpoint generation; entries stored under an older one are dead. */
  private readonly generations: number[] = [];
  /** Bumped on every change, so the per-request memo below knows when it is stale. */
  private version = 0;
  private memoHashes: readonly number[] | undefined;
  private memoVersion = -1;
  /** endpoint index → deepest matched block count for memoHashes. */
  private readonly memo = new Map<number, number>();

  constructor(readonly maxEntries: number) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1) throw new RangeError(`PrefixIndex: maxEntries must be a positive integer, got ${maxEntries}`);
  }

  /** Live and dead entries together; never above maxEntries. */
  get size(): number {
    return this.entries.size;
  }

  /** Records that a request with these chained hashes was routed to `endpointIndex`. O(hashes.length). */
  record(hashes: readonly number[], endpointIndex: number): void {
    if (hashes.length === 0) return;
    checkIndex(endpointIndex);
    const value = this.pack(endpointIndex);
    const entries = this.entries;
    for (const h of hashes) {
      // delete + set moves the key to the newest end of the insertion order.
      entries.delete(h);
      entries.set(h, value);
    }
    // Drop the oldest until under the cap; a Map iterator starts at the oldest key.
    if (entries.size > this.maxEntries) {
      const keys = entries.keys();
      while (entries.size > this.maxEntries) {
        const oldest = keys.next();
        if (oldest.done === true) break;
        entries.delete(oldest.value);
      }
    }
    this.version++;
  }

  /**
   * How many leading blocks of the request's prefix endpoint `index` was
   * last routed: the deepest k such that hashes[k-1] maps to it. Because the
   * hashes are chained, hashes[k-1] stands for blocks 0..k-1 together, so a
   * shallower block later re-routed elsewhere (or evicted first, being
   * older) does not hide a deeper match. The per-hash lookups are done once
   * per (hashes array, index version) and shared by every endpoint scored
   * for that request, so scoring N endpoints costs O(hashes + N), not
   * O(hashes × N). The memo keys on the array's identity: callers must not
   * mutate a hashes array in place (RequestView declares it readonly).
   */
  matchedBlocks(hashes: readonly number[], index: number): number {
    if (hashes.length === 0) return 0;
    if (hashes !== this.memoHashes || this.memoVersion !== this.version) this.fillMemo(hashes);
    return this.memo.get(index) ?? 0;
  }

  /** Forgets everything routed to an endpoint (removed, or its engine restarted with an empty cache). O(1). */
  forgetEndpoint(index: number): void {
    checkIndex(index);
    this.generations[index] = (this.generations[index] ?? 0) + 1;
    this.version++;
  }

  /** Forgets everything. */
  clear(): void {
    this.entries.clear();
    this.memoHashes = undefined;
    this.version++;
  }

  private pack(index: number): number {
    return (this.generations[index] ?? 0) * PREFIX_INDEX_MAX_ENDPOINTS + index;
  }

  private fillMemo(hashes: readonly number[]): void {
    const memo = this.memo;
    memo.clear();
    for (let k = 0; k < hashes.length; k++) {
      const value = this.entries.get(hashes[k]!);
      if (value === undefined) continue;
      const index = value % PREFIX_INDEX_MAX_ENDPOINTS;
      // A deeper block overwrites a shallower one: the memo ends with the deepest.
      if (value === this.pack(index)) memo.set(index, k + 1);
    }
    this.memoHashes = hashes;
    this.memoVersion = this.version;
  }
}

function checkIndex(index: number): void {
  if (!Number.isInteger(index) || index < 0 || index >= PREFIX_INDEX_MAX_ENDPOINTS) {
    throw new RangeError(`PrefixIndex: endpoint index must be an integer in [0, ${PREFIX_INDEX_MAX_ENDPOINTS}), got ${index}`);
  }
}
