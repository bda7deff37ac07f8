/**
 * The prefix-affinity index: block hash → the endpoint that block was last
 * routed to, as an LRU with a hard cap on entries. Bounded on purpose: a
 * tree of every prefix ever seen grows until the process runs out of memory.
 *
 * It lives in a SharedArrayBuffer so that the gateway's main thread (fast
 * path) and the scheduler worker (queued requests) read and record the same
 * ownership. Layout: a fixed pool of `maxEntries` nodes (key, endpoint,
 * generation, LRU links, bucket chain) and a power-of-two bucket array, all
 * Int32/Float64 arrays over one buffer. A one-word spin lock guards every
 * operation; a thread that cannot take it within a few hundred spins skips
 * the operation (no match, nothing recorded) rather than wait: affinity is
 * a heuristic, and the main thread must never block on a descheduled worker.
 */
import type { PrefixIndexReader } from "./types.ts";

/** Endpoint rows the index can address (forgetEndpoint keeps a generation for each). */
const PREFIX_INDEX_MAX_ENDPOINTS = 4096;

/** Header words. */
const LOCK = 0;
const SIZE = 1;
/** Most recently used node, -1 when empty. */
const MRU = 2;
/** Least recently used node, -1 when empty. */
const LRU = 3;
/** Head of the free-node list (linked through `next`), -1 when full. */
const FREE = 4;
/** Bumped on every change, so each thread's per-request memo knows when it is stale. */
const VERSION = 5;
const HEADER_WORDS = 8;

const NONE = -1;
/** Spins before giving up on the lock (a few microseconds). */
const LOCK_SPINS = 256;

export class PrefixIndex implements PrefixIndexReader {
  readonly buffer: SharedArrayBuffer;
  private readonly header: Int32Array;
  private readonly keys: Float64Array;
  private readonly owners: Int32Array;
  private readonly gens: Int32Array;
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private readonly chain: Int32Array;
  private readonly buckets: Int32Array;
  /** Per-endpoint generation; entries stored under an older one are dead. */
  private readonly endpointGens: Int32Array;
  private readonly mask: number;

  private memoHashes: readonly number[] | undefined;
  private memoVersion = -1;
  /** endpoint index → deepest matched block count for memoHashes. */
  private readonly memo = new Map<number, number>();
  /** Operations skipped because the lock was contended (for tests and diagnostics). */
  skipped = 0;

  /** A new index with room for `maxEntries`, or a view of one another thread made (pass its `buffer`). */
  constructor(
    readonly maxEntries: number,
    buffer?: SharedArrayBuffer,
  ) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1) throw new RangeError(`PrefixIndex: maxEntries must be a positive integer, got ${maxEntries}`);
    let nBuckets = 1;
    while (nBuckets < maxEntries) nBuckets *= 2;
    this.mask = nBuckets - 1;
    const n = maxEntries;
    // Float64 keys first (8-byte alignment), then every Int32 array.
    const bytes = n * 8 + (HEADER_WORDS + 5 * n + nBuckets + PREFIX_INDEX_MAX_ENDPOINTS) * 4;
    this.buffer = buffer ?? new SharedArrayBuffer(bytes);
    if (this.buffer.byteLength < bytes) throw new RangeError("PrefixIndex: buffer too small for maxEntries");
    let at = 0;
    this.keys = new Float64Array(this.buffer, at, n);
    at += n * 8;
    const ints = (count: number) => {
      const a = new Int32Array(this.buffer, at, count);
      at += count * 4;
      return a;
    };
    this.header = ints(HEADER_WORDS);
    this.owners = ints(n);
    this.gens = ints(n);
    this.prev = ints(n);
    this.next = ints(n);
    this.chain = ints(n);
    this.buckets = ints(nBuckets);
    this.endpointGens = ints(PREFIX_INDEX_MAX_ENDPOINTS);
    if (!buffer) this.reset();
  }

  /** Live and dead entries together; never above maxEntries. */
  get size(): number {
    return Atomics.load(this.header, SIZE);
  }

  /** Records that a request with these chained hashes was routed to `endpointIndex`. O(hashes.length). */
  record(hashes: readonly number[], endpointIndex: number): void {
    if (hashes.length === 0) return;
    checkIndex(endpointIndex);
    if (!this.lock()) return;
    try {
      const gen = this.endpointGens[endpointIndex]!;
      for (const h of hashes) this.put(h, endpointIndex, gen);
      Atomics.add(this.header, VERSION, 1);
    } finally {
      this.unlock();
    }
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
    if (hashes !== this.memoHashes || this.memoVersion !== Atomics.load(this.header, VERSION)) this.fillMemo(hashes);
    return this.memo.get(index) ?? 0;
  }

  /** Forgets everything routed to an endpoint (removed, or its engine restarted with an empty cache). O(1). */
  forgetEndpoint(index: number): void {
    checkIndex(index);
    Atomics.add(this.endpointGens, index, 1);
    Atomics.add(this.header, VERSION, 1);
  }

  /** Forgets everything. */
  clear(): void {
    if (!this.lock()) return;
    try {
      this.reset();
      Atomics.add(this.header, VERSION, 1);
    } finally {
      this.unlock();
    }
    this.memoHashes = undefined;
  }

  private reset(): void {
    const n = this.maxEntries;
    this.buckets.fill(NONE);
    for (let i = 0; i < n; i++) this.next[i] = i + 1 < n ? i + 1 : NONE;
    this.header[SIZE] = 0;
    this.header[MRU] = NONE;
    this.header[LRU] = NONE;
    this.header[FREE] = 0;
  }

  private lock(): boolean {
    for (let i = 0; i < LOCK_SPINS; i++) {
      if (Atomics.compareExchange(this.header, LOCK, 0, 1) === 0) return true;
    }
    this.skipped++;
    return false;
  }

  private unlock(): void {
    Atomics.store(this.header, LOCK, 0);
  }

  private bucketOf(hash: number): number {
    // Hashes are 53-bit integers: fold the high part in so both halves count.
    return ((hash % 0x100000000) ^ Math.floor(hash / 0x100000000)) & this.mask;
  }

  private find(hash: number, bucket: number): number {
    for (let i = this.buckets[bucket]!; i !== NONE; i = this.chain[i]!) if (this.keys[i] === hash) return i;
    return NONE;
  }

  /** Insert or refresh one hash (under the lock). */
  private put(hash: number, owner: number, gen: number): void {
    const bucket = this.bucketOf(hash);
    let node = this.find(hash, bucket);
    if (node !== NONE) {
      this.unlinkLru(node);
    } else {
      node = this.header[FREE]!;
      if (node !== NONE) {
        this.header[FREE] = this.next[node]!;
        this.header[SIZE]!++;
      } else {
        node = this.header[LRU]!;
        this.unlinkLru(node);
        this.unlinkChain(node);
      }
      this.keys[node] = hash;
      this.chain[node] = this.buckets[bucket]!;
      this.buckets[bucket] = node;
    }
    this.owners[node] = owner;
    this.gens[node] = gen;
    // Push at the MRU end.
    const head = this.header[MRU]!;
    this.prev[node] = NONE;
    this.next[node] = head;
    if (head !== NONE) this.prev[head] = node;
    this.header[MRU] = node;
    if (this.header[LRU] === NONE) this.header[LRU] = node;
  }

  private unlinkLru(node: number): void {
    const p = this.prev[node]!;
    const n = this.next[node]!;
    if (p !== NONE) this.next[p] = n;
    else this.header[MRU] = n;
    if (n !== NONE) this.prev[n] = p;
    else this.header[LRU] = p;
  }

  private unlinkChain(node: number): void {
    const bucket = this.bucketOf(this.keys[node]!);
    let i = this.buckets[bucket]!;
    if (i === node) {
      this.buckets[bucket] = this.chain[node]!;
      return;
    }
    while (i !== NONE) {
      const after = this.chain[i]!;
      if (after === node) {
        this.chain[i] = this.chain[node]!;
        return;
      }
      i = after;
    }
  }

  private fillMemo(hashes: readonly number[]): void {
    const memo = this.memo;
    memo.clear();
    this.memoHashes = hashes;
    if (!this.lock()) {
      this.memoVersion = -1; // try again next time
      return;
    }
    try {
      for (let k = 0; k < hashes.length; k++) {
        const node = this.find(hashes[k]!, this.bucketOf(hashes[k]!));
        if (node === NONE) continue;
        const owner = this.owners[node]!;
        // A deeper block overwrites a shallower one: the memo ends with the deepest.
        if (this.gens[node] === this.endpointGens[owner]) memo.set(owner, k + 1);
      }
      this.memoVersion = this.header[VERSION]!;
    } finally {
      this.unlock();
    }
  }
}

function checkIndex(index: number): void {
  if (!Number.isInteger(index) || index < 0 || index >= PREFIX_INDEX_MAX_ENDPOINTS) {
    throw new RangeError(`PrefixIndex: endpoint index must be an integer in [0, ${PREFIX_INDEX_MAX_ENDPOINTS}), got ${index}`);
  }
}
