/**
 * The KV-block index: which endpoint's engine holds which run of tokens, as
 * its KV-cache events say, keyed by token-block keys (token-blocks.ts) so it
 * works whatever hash algorithm the engine uses. A fixed pool of `capacity`
 * entries (key, endpoint) in a SharedArrayBuffer, chained from a
 * power-of-two bucket array: the KV-events worker writes it, the main
 * thread (fast path) and the scheduler worker read it while scoring,
 * without a message. The ceiling is hard: the writer (kv-block-tracker.ts)
 * lets its oldest blocks go to stay under it.
 *
 * Buckets and chains hold entry + 1 (0 = none), so a buffer fresh from the
 * allocator is an empty index and pages nobody writes are never touched:
 * a gateway whose engines publish nothing pays no memory for the ceiling.
 * A one-word spin lock guards every operation; a reader that cannot take it
 * within a few hundred spins scores as if nothing matched rather than wait
 * (the main thread must never block on a descheduled worker).
 */
import type { KvEventStats } from "../shared/kv-event-stats.ts";
import type { KvBlockIndexReader } from "./types.ts";

const LOCK = 0;
/** Bumped after every write, so each reader's per-request memo knows when it is stale. */
const VERSION = 1;
const SIZE = 2;
const HEADER_WORDS = 4;
/** Reader spins before giving up on the lock (a few microseconds). */
const READ_SPINS = 256;

export class KvBlockIndex implements KvBlockIndexReader {
  readonly buffer: SharedArrayBuffer;
  private readonly header: Int32Array;
  private readonly keys: Float64Array;
  private readonly owners: Int32Array;
  private readonly chain: Int32Array;
  private readonly buckets: Int32Array;
  private readonly mask: number;
  // Writer's own: entries never used yet start at `unused`; freed ones are reused first.
  private unused = 0;
  private readonly freed: number[] = [];
  // Reader's memo: endpoint → matched keys, for one keys array at one version.
  private memoKeys: readonly number[] | undefined;
  private memoVersion = -1;
  private readonly memo = new Map<number, number>();
  /** Scratch for fillMemo: endpoints still holding every key so far. */
  private readonly alive = new Int32Array(64);
  /** Reads skipped because the writer held the lock (diagnostics). */
  skipped = 0;

  /** A new index of `capacity` entries, or a view of one another thread made (its `buffer`); `stats` says whose stream is live. */
  constructor(
    readonly capacity: number,
    private readonly stats: Pick<KvEventStats, "live">,
    buffer?: SharedArrayBuffer,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`KvBlockIndex: capacity must be a positive integer, got ${capacity}`);
    let nBuckets = 1;
    while (nBuckets < capacity) nBuckets *= 2;
    this.mask = nBuckets - 1;
    const bytes = capacity * 8 + (HEADER_WORDS + 2 * capacity + nBuckets) * 4;
    this.buffer = buffer ?? new SharedArrayBuffer(bytes);
    if (this.buffer.byteLength < bytes) throw new RangeError("KvBlockIndex: buffer too small for its capacity");
    let at = 0;
    this.keys = new Float64Array(this.buffer, at, capacity);
    at += capacity * 8;
    const ints = (n: number) => {
      const a = new Int32Array(this.buffer, at, n);
      at += n * 4;
      return a;
    };
    this.header = ints(HEADER_WORDS);
    this.owners = ints(capacity);
    this.chain = ints(capacity);
    this.buckets = ints(nBuckets);
  }

  /** Entries in use, every endpoint together. */
  get size(): number {
    return Atomics.load(this.header, SIZE);
  }

  live(endpoint: number): boolean {
    return this.stats.live(endpoint);
  }

  /**
   * How many leading keys of `keys` endpoint `index` holds: the first k
   * keys all present for it, stopping at the first one missing (an engine
   * finds cached blocks the same way, longest prefix first). The lookups are
   * done once per (keys array, index version) for every endpoint together,
   * so scoring N endpoints costs O(keys + N). Callers must not mutate a keys
   * array in place (the memo keys on its identity).
   */
  matchedBlocks(keys: readonly number[], index: number): number {
    if (keys.length === 0) return 0;
    if (keys !== this.memoKeys || this.memoVersion !== Atomics.load(this.header, VERSION)) this.fillMemo(keys);
    return this.memo.get(index) ?? 0;
  }

  // ——— the writer (the KV-events worker) only ———

  /** Run `fn` holding the lock, then publish a new version. Keep it short: readers skip rather than wait. */
  write<T>(fn: () => T): T {
    while (Atomics.compareExchange(this.header, LOCK, 0, 1) !== 0);
    try {
      return fn();
    } finally {
      Atomics.add(this.header, VERSION, 1);
      Atomics.store(this.header, LOCK, 0);
    }
  }

  /** Whether an entry is free for insert (false: the index is at its ceiling). Under write(). */
  hasRoom(): boolean {
    return this.freed.length > 0 || this.unused < this.capacity;
  }

  /** Add (key, endpoint); returns the entry. The caller checked hasRoom(). Under write(). */
  insert(key: number, endpoint: number): number {
    const e = this.freed.pop() ?? this.unused++;
    if (e >= this.capacity) throw new RangeError("KvBlockIndex: full (check hasRoom first)");
    const b = this.bucketOf(key);
    this.keys[e] = key;
    this.owners[e] = endpoint;
    this.chain[e] = this.buckets[b]!;
    this.buckets[b] = e + 1;
    this.header[SIZE]!++;
    return e;
  }

  /** Take an entry out. Under write(). */
  remove(entry: number): void {
    const b = this.bucketOf(this.keys[entry]!);
    let link = this.buckets[b]!;
    if (link === entry + 1) this.buckets[b] = this.chain[entry]!;
    else {
      while (link !== 0 && this.chain[link - 1] !== entry + 1) link = this.chain[link - 1]!;
      if (link === 0) return; // not linked: already removed
      this.chain[link - 1] = this.chain[entry]!;
    }
    this.chain[entry] = 0;
    this.freed.push(entry);
    this.header[SIZE]!--;
  }

  /** The key of an entry (the writer chains a child block from its parent's last key). */
  keyOf(entry: number): number {
    return this.keys[entry]!;
  }

  private bucketOf(key: number): number {
    // Keys are 53-bit integers: fold the high part in so both halves count.
    return ((key % 0x100000000) ^ Math.floor(key / 0x100000000)) & this.mask;
  }

  private fillMemo(keys: readonly number[]): void {
    const memo = this.memo;
    memo.clear();
    this.memoKeys = keys;
    let locked = false;
    for (let i = 0; i < READ_SPINS && !locked; i++) locked = Atomics.compareExchange(this.header, LOCK, 0, 1) === 0;
    if (!locked) {
      this.skipped++;
      this.memoVersion = -1; // try again next time
      return;
    }
    try {
      // alive[0..n): endpoints holding every key so far (a few: the engines that hold this prefix).
      const alive = this.alive;
      let n = 0;
      let k = 0;
      for (; k < keys.length; k++) {
        const key = keys[k]!;
        let kept = 0;
        for (let link = this.buckets[this.bucketOf(key)]!; link !== 0; link = this.chain[link - 1]!) {
          if (this.keys[link - 1] !== key) continue;
          const owner = this.owners[link - 1]!;
          if (k === 0) {
            let seen = false;
            for (let i = 0; i < kept && !seen; i++) seen = alive[i] === owner;
            if (!seen && kept < alive.length) alive[kept++] = owner;
            continue;
          }
          // Alive at k-1 (in alive[kept..n)): swap it into the kept part.
          for (let i = kept; i < n; i++) {
            if (alive[i] === owner) {
              alive[i] = alive[kept]!;
              alive[kept++] = owner;
              break;
            }
          }
        }
        // Those not kept held keys 0..k-1 and not key k.
        for (let i = kept; i < n; i++) memo.set(alive[i]!, k);
        n = kept;
        if (n === 0) break;
      }
      for (let i = 0; i < n; i++) memo.set(alive[i]!, k);
      this.memoVersion = this.header[VERSION]!;
    } finally {
      Atomics.store(this.header, LOCK, 0);
    }
  }
}
