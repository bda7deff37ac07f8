/**
 * Per endpoint slot, the state of its engine's KV-event stream and what the
 * gateway's block index holds for it: a SharedArrayBuffer the KV-events
 * worker writes and the scorers (main thread, scheduler worker) and the
 * metrics collector read without a message. One writer (the KV-events
 * worker); Int32 fields through Atomics, Float64 counters and times with
 * plain aligned stores (single-copy atomic where Bun runs, as in the
 * endpoint table).
 */

/** Where an endpoint's event stream stands; only LIVE lets precise-prefix use the index. */
export const KV_STREAM = {
  /** No stream: the endpoint publishes nothing (or no one said where). */
  NONE: 0,
  /** Subscribed, its history still being replayed: the index is not yet whole. */
  SYNCING: 1,
  /** Subscribed and heard from lately: the index is what the engine holds. */
  LIVE: 2,
  /** Disconnected, or silent past kv_events.stale_after_ms: the index may be behind. */
  STALE: 3,
} as const;
export type KvStreamState = (typeof KV_STREAM)[keyof typeof KV_STREAM];
export const KV_STREAM_NAMES = ["none", "syncing", "live", "stale"] as const;

/** Why an endpoint's index was dropped (the subscriber's reset reasons, and the engine's own AllBlocksCleared). */
export const KV_INDEX_DROP_REASONS = ["publisher-restarted", "replay-incomplete", "replay-failed", "replay-overrun", "no-replay-endpoint", "all-blocks-cleared"] as const;
export type KvIndexDropReason = (typeof KV_INDEX_DROP_REASONS)[number];

/** Int32 fields per endpoint. */
const I_STATE = 0;
/** Blocks of 16 tokens the index holds for the endpoint. */
const I_BLOCKS = 1;
const INT_STRIDE = 2;

/** Float64 fields per endpoint. */
export const KV_COUNTER = {
  /** Events received, by type. */
  BLOCK_STORED: 0,
  BLOCK_REMOVED: 1,
  ALL_BLOCKS_CLEARED: 2,
  /** Replay requests made to the engine's replay socket. */
  REPLAYS: 3,
  /** Blocks the index let go to stay under its ceiling (oldest first). */
  EVICTED: 4,
  /** Stored blocks not indexed: no token ids, an unknown parent, a LoRA adapter or extra keys, another medium. */
  SKIPPED: 5,
  /** Batches that did not decode. */
  INVALID: 6,
} as const;
const F_LAST_HEARD = 7;
const F_DROPS = 8;
const FLOAT_STRIDE = F_DROPS + KV_INDEX_DROP_REASONS.length;

export class KvEventStats {
  readonly buffer: SharedArrayBuffer;
  private readonly ints: Int32Array;
  private readonly floats: Float64Array;

  constructor(
    readonly slots: number,
    buffer?: SharedArrayBuffer,
  ) {
    const floatBytes = slots * FLOAT_STRIDE * 8;
    this.buffer = buffer ?? new SharedArrayBuffer(floatBytes + slots * INT_STRIDE * 4);
    this.floats = new Float64Array(this.buffer, 0, slots * FLOAT_STRIDE);
    this.ints = new Int32Array(this.buffer, floatBytes, slots * INT_STRIDE);
    if (!buffer) for (let s = 0; s < slots; s++) this.floats[s * FLOAT_STRIDE + F_LAST_HEARD] = NaN;
  }

  state(slot: number): KvStreamState {
    return (slot >= 0 && slot < this.slots ? Atomics.load(this.ints, slot * INT_STRIDE + I_STATE) : KV_STREAM.NONE) as KvStreamState;
  }

  live(slot: number): boolean {
    return this.state(slot) === KV_STREAM.LIVE;
  }

  blocks(slot: number): number {
    return Atomics.load(this.ints, slot * INT_STRIDE + I_BLOCKS);
  }

  counter(slot: number, field: number): number {
    return this.floats[slot * FLOAT_STRIDE + field]!;
  }

  drops(slot: number, reason: KvIndexDropReason): number {
    return this.floats[slot * FLOAT_STRIDE + F_DROPS + KV_INDEX_DROP_REASONS.indexOf(reason)]!;
  }

  /** Date.now() when the publisher last sent anything (heartbeat replies included); NaN when never. */
  lastHeardAt(slot: number): number {
    return this.floats[slot * FLOAT_STRIDE + F_LAST_HEARD]!;
  }

  // ——— the KV-events worker only ———

  /** A new stream in this slot (or none): counters back to zero. */
  reset(slot: number, state: KvStreamState): void {
    this.floats.fill(0, slot * FLOAT_STRIDE, (slot + 1) * FLOAT_STRIDE);
    this.floats[slot * FLOAT_STRIDE + F_LAST_HEARD] = NaN;
    Atomics.store(this.ints, slot * INT_STRIDE + I_BLOCKS, 0);
    Atomics.store(this.ints, slot * INT_STRIDE + I_STATE, state);
  }

  setState(slot: number, state: KvStreamState): void {
    Atomics.store(this.ints, slot * INT_STRIDE + I_STATE, state);
  }

  setBlocks(slot: number, blocks: number): void {
    Atomics.store(this.ints, slot * INT_STRIDE + I_BLOCKS, blocks);
  }

  add(slot: number, field: number, n = 1): void {
    this.floats[slot * FLOAT_STRIDE + field]! += n;
  }

  addDrop(slot: number, reason: KvIndexDropReason): void {
    this.floats[slot * FLOAT_STRIDE + F_DROPS + KV_INDEX_DROP_REASONS.indexOf(reason)]! += 1;
  }

  setLastHeardAt(slot: number, ms: number | undefined): void {
    this.floats[slot * FLOAT_STRIDE + F_LAST_HEARD] = ms ?? NaN;
  }
}
