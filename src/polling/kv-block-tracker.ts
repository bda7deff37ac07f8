/**
 * Applies engines' KV-cache events to the shared KV-block index (the
 * KV-events worker's side of it). Per endpoint it maps each engine block
 * hash to the index entries of its tokens (one per 16 tokens), so that a
 * BlockRemoved finds them and a child block chains its keys from its
 * parent's: the index is keyed by tokens, whatever hash the engine uses.
 *
 * - BlockStored: each block's keys chain from its parent's last key (the
 *   root for a block with no parent). A block whose parent is unknown (not
 *   indexed: stored before the history the engine still had, or let go
 *   under the ceiling), that carries no tokens (offloading events), belongs
 *   to a LoRA adapter or has extra keys (another model's or salt's hash
 *   space), sits in another medium than the GPU, or has a block size that is
 *   not a multiple of 16, is skipped and counted.
 * - A hash stored twice (vLLM does not de-duplicate blocks) is counted, and
 *   leaves the index at its last BlockRemoved.
 * - AllBlocksCleared, and a stream reset (the subscriber could not prove
 *   continuity), drop the endpoint's whole index.
 * - The ceiling: when the index is full, the endpoint holding the most lets
 *   its oldest block go (insertion order), so one busy engine cannot push
 *   out the others.
 * - Refused whole, counted and reported (an engine never sends them, a
 *   rogue publisher could): an event whose token ids are not `block_size`
 *   per block, one that would take more than a quarter of the index, one
 *   with a block hash longer than any engine's. A block's room is made
 *   before any of its entries is written, so an insert is never left half
 *   done: every entry in the index belongs to a block some endpoint holds.
 */
import { type BlockHash, type BlockStored, blockHashKey, type KvEventBatch } from "../engines/kv-events/model.ts";
import type { KvBlockIndex } from "../scheduling/kv-block-index.ts";
import { INDEX_BLOCK_TOKENS, nextTokenKey, TOKEN_KEY_ROOT } from "../scheduling/token-blocks.ts";
import { KV_COUNTER, type KvEventRejectReason, type KvEventStats, type KvIndexDropReason } from "../shared/kv-event-stats.ts";

/** Index entries written per hold of its lock: readers never wait long. */
const WRITE_CHUNK = 16;
/**
 * The longest block hash accepted: vLLM's are 64-bit integers or 32-byte
 * sha256 digests (vllm/v1/core/kv_cache_utils.py). Each indexed block keeps
 * its hash as a map key, so an unbounded one is unbounded memory.
 */
export const MAX_BLOCK_HASH_BYTES = 64;
/** One event may take at most this share of the index: a real prefill is a small part of it, and a larger one would evict every other engine. */
const MAX_EVENT_SHARE = 4;

/** Told of each event refused (the worker logs it). */
type RejectedEventListener = (slot: number, reason: KvEventRejectReason, detail: string) => void;

interface Tracked {
  /** Engine hash → first index entry of its tokens; insertion order is age. */
  readonly blocks: Map<string, number>;
  /** Index entries held (blocks × keys per block). */
  entries: number;
}

export class KvBlockTracker {
  private readonly endpoints = new Map<number, Tracked>();
  /** Per index entry: the next entry of the same block (-1: last). */
  private readonly nextUnit: Int32Array;
  /** Per first entry of a block: how many times the engine stored it. */
  private readonly refs: Int32Array;

  /** Index entries one event may add. */
  private readonly maxEventEntries: number;

  constructor(
    private readonly index: KvBlockIndex,
    private readonly stats: KvEventStats,
    private readonly rejected: RejectedEventListener = () => {},
  ) {
    this.nextUnit = new Int32Array(index.capacity);
    this.refs = new Int32Array(index.capacity);
    this.maxEventEntries = Math.max(1, Math.floor(index.capacity / MAX_EVENT_SHARE));
  }

  /** Blocks indexed for an endpoint (engine blocks, not keys). */
  blocksOf(slot: number): number {
    return this.endpoints.get(slot)?.blocks.size ?? 0;
  }

  apply(slot: number, batch: KvEventBatch): void {
    const t = this.tracked(slot);
    for (const e of batch.events) {
      switch (e.type) {
        case "BlockStored":
          this.stats.add(slot, KV_COUNTER.BLOCK_STORED);
          this.store(slot, t, e);
          break;
        case "BlockRemoved":
          this.stats.add(slot, KV_COUNTER.BLOCK_REMOVED);
          if (e.medium !== null && e.medium !== "GPU") break;
          if (e.blockHashes.some(tooLong)) {
            this.reject(slot, "hash-length", `a BlockRemoved with a block hash over ${MAX_BLOCK_HASH_BYTES} bytes`);
            break;
          }
          this.index.write(() => {
            for (const h of e.blockHashes) this.release(t, blockHashKey(h), false);
          });
          break;
        case "AllBlocksCleared":
          this.stats.add(slot, KV_COUNTER.ALL_BLOCKS_CLEARED);
          this.drop(slot, "all-blocks-cleared");
          break;
        default: {
          const never: never = e;
          throw new Error(`unknown event ${JSON.stringify(never)}`);
        }
      }
    }
    this.stats.setBlocks(slot, t.entries);
  }

  /** Forget everything indexed for an endpoint; with a reason, count it as a drop. */
  drop(slot: number, reason: KvIndexDropReason | undefined): void {
    const t = this.endpoints.get(slot);
    if (reason !== undefined) this.stats.addDrop(slot, reason);
    if (!t) return;
    const firsts = [...t.blocks.values()];
    for (let i = 0; i < firsts.length; i += WRITE_CHUNK) {
      this.index.write(() => {
        for (const first of firsts.slice(i, i + WRITE_CHUNK)) this.removeEntries(first);
      });
    }
    t.blocks.clear();
    t.entries = 0;
    this.stats.setBlocks(slot, 0);
  }

  /** The endpoint left: drop its index and its bookkeeping. */
  forget(slot: number): void {
    this.drop(slot, undefined);
    this.endpoints.delete(slot);
  }

  private tracked(slot: number): Tracked {
    let t = this.endpoints.get(slot);
    if (!t) this.endpoints.set(slot, (t = { blocks: new Map(), entries: 0 }));
    return t;
  }

  private store(slot: number, t: Tracked, e: BlockStored): void {
    const refusal = this.refusal(e);
    if (refusal !== undefined) {
      this.reject(slot, refusal[0], refusal[1]);
      return;
    }
    const units = e.blockSize / INDEX_BLOCK_TOKENS;
    const usable =
      Number.isInteger(units) &&
      units >= 1 &&
      e.tokenIds.length === e.blockHashes.length * e.blockSize &&
      e.loraId === null &&
      e.loraName === null &&
      (e.extraKeys === null || e.extraKeys.every((k) => k === null)) &&
      (e.medium === null || e.medium === "GPU") &&
      (e.groupIdx === null || e.groupIdx === 0);
    let parent = usable ? this.parentKey(t, e.parentBlockHash) : undefined;
    if (parent === undefined) {
      this.stats.add(slot, KV_COUNTER.SKIPPED, e.blockHashes.length);
      return;
    }
    const keys = new Array<number>(units);
    for (let b = 0; b < e.blockHashes.length; b++) {
      const hash = blockHashKey(e.blockHashes[b]!);
      const known = t.blocks.get(hash);
      if (known !== undefined) {
        this.refs[known]!++;
        parent = this.lastKey(known);
        continue;
      }
      for (let u = 0; u < units; u++) keys[u] = parent = nextTokenKey(parent, e.tokenIds, (b * units + u) * INDEX_BLOCK_TOKENS);
      // Room first, then every entry: the block is indexed whole or not at all.
      if (!this.makeRoom(slot, units)) {
        this.stats.add(slot, KV_COUNTER.SKIPPED, e.blockHashes.length - b);
        return;
      }
      let first = -1;
      let prev = -1;
      for (let u = 0; u < units; u += WRITE_CHUNK) {
        this.index.write(() => {
          for (let v = u; v < Math.min(units, u + WRITE_CHUNK); v++) {
            const entry = this.index.insert(keys[v]!, slot);
            this.nextUnit[entry] = -1;
            if (prev >= 0) this.nextUnit[prev] = entry;
            else first = entry;
            prev = entry;
          }
        });
      }
      t.entries += units;
      this.refs[first] = 1;
      t.blocks.set(hash, first);
    }
  }

  /** Why an event must be refused whole, before anything is indexed; undefined when it may go on. */
  private refusal(e: BlockStored): [KvEventRejectReason, string] | undefined {
    if (e.blockHashes.some(tooLong) || (e.parentBlockHash !== null && tooLong(e.parentBlockHash)))
      return ["hash-length", `a BlockStored with a block hash over ${MAX_BLOCK_HASH_BYTES} bytes`];
    // No tokens at all is an offloading event (skipped, not refused); some tokens must be block_size per block.
    if (e.tokenIds.length !== 0 && e.tokenIds.length !== e.blockHashes.length * e.blockSize)
      return ["token-count", `a BlockStored of ${e.blockHashes.length} blocks of ${e.blockSize} tokens carrying ${e.tokenIds.length} token ids`];
    const entries = e.blockHashes.length * Math.ceil(e.blockSize / INDEX_BLOCK_TOKENS);
    if (entries > this.maxEventEntries)
      return [
        "oversized",
        `a BlockStored of ${e.blockHashes.length} blocks of ${e.blockSize} tokens (${entries} index entries; one event may take ${this.maxEventEntries})`,
      ];
    return undefined;
  }

  private reject(slot: number, reason: KvEventRejectReason, detail: string): void {
    this.stats.addRejected(slot, reason);
    this.rejected(slot, reason, detail);
  }

  /** The key a block's first tokens chain from: the root, or the parent's last key; undefined when the parent is not indexed. */
  private parentKey(t: Tracked, parent: BlockHash | null): number | undefined {
    if (parent === null) return TOKEN_KEY_ROOT;
    const first = t.blocks.get(blockHashKey(parent));
    return first === undefined ? undefined : this.lastKey(first);
  }

  private lastKey(first: number): number {
    let e = first;
    while (this.nextUnit[e]! >= 0) e = this.nextUnit[e]!;
    return this.index.keyOf(e);
  }

  /** One BlockRemoved (or an eviction, `force`): the block leaves once every copy the engine stored is gone. Under the index's lock. */
  private release(t: Tracked, hash: string, force: boolean): void {
    const first = t.blocks.get(hash);
    if (first === undefined) return;
    if (!force && --this.refs[first]! > 0) return;
    t.blocks.delete(hash);
    t.entries -= this.removeEntries(first);
  }

  private removeEntries(first: number): number {
    let n = 0;
    for (let e = first; e >= 0; ) {
      const next = this.nextUnit[e]!;
      this.index.remove(e);
      this.nextUnit[e] = -1;
      e = next;
      n++;
    }
    this.refs[first] = 0;
    return n;
  }

  /**
   * Free `n` entries of the index for a block about to be stored: while
   * short, the endpoint holding the most lets its oldest block go (one hold
   * of the lock each). False, with nothing let go, when the index could
   * never hold `n`.
   */
  private makeRoom(storing: number, n: number): boolean {
    if (n > this.index.capacity) return false;
    while (this.index.capacity - this.index.size < n) {
      let victim: number | undefined;
      let most = 0;
      for (const [slot, t] of this.endpoints) {
        if (t.entries > most) {
          most = t.entries;
          victim = slot;
        }
      }
      const t = victim === undefined ? undefined : this.endpoints.get(victim);
      const oldest = t?.blocks.keys().next();
      // Every entry belongs to a held block, so this cannot happen; refuse rather than write past the ceiling.
      if (!t || !oldest || oldest.done) throw new Error(`KvBlockTracker: the index is full and nothing can be let go (storing for ${storing})`);
      this.index.write(() => this.release(t, oldest.value, true));
      this.stats.add(victim!, KV_COUNTER.EVICTED);
      this.stats.setBlocks(victim!, t.entries);
    }
    return true;
  }
}

function tooLong(hash: BlockHash): boolean {
  return typeof hash !== "bigint" && hash.length > MAX_BLOCK_HASH_BYTES;
}
