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
export const KV_INDEX_DROP_REASONS = [
  "publisher-restarted",
  "replay-incomplete",
  "replay-failed",
  "replay-overrun",
  "apply-overrun",
  "no-replay-endpoint",
  "all-blocks-cleared",
] as const;
export type KvIndexDropReason = (typeof KV_INDEX_DROP_REASONS)[number];

/**
 * Why an event was refused whole, before it touched the index: it would take
 * more index entries than one event may (`oversized`), its token ids are not
 * `block_size` per block (`token-count`), or a block hash is longer than any
 * engine's (`hash-length`).
 */
export const KV_EVENT_REJECT_REASONS = ["oversized", "token-count", "hash-length"] as const;
export type KvEventRejectReason = (typeof KV_EVENT_REJECT_REASONS)[number];

/**
 * Which bound made the worker drop received batches instead of holding them:
 * the endpoint's byte budget, the gateway's (every endpoint together), or
 * the count of live batches waiting for a replay.
 */
export const KV_BATCH_DROP_BOUNDS = ["endpoint-bytes", "gateway-bytes", "batches"] as const;
export type KvBatchDropBound = (typeof KV_BATCH_DROP_BOUNDS)[number];

/**
 * Why a message on the gateway's bound SUB socket (`kv_events.listen`) was
 * dropped before reaching any endpoint's stream: its topic is no endpoint's
 * `kv_events.topic`, or it is not `[topic, seq, payload]`.
 */
export const KV_UNROUTED_REASONS = ["unknown-topic", "malformed"] as const;
export type KvUnroutedReason = (typeof KV_UNROUTED_REASONS)[number];

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
/** Date.now() when the worker had last applied everything it had received from the stream. */
const F_CAUGHT_UP = 8;
const F_DROPS = 9;
const F_REJECTED = F_DROPS + KV_INDEX_DROP_REASONS.length;
const F_DROPPED_BATCHES = F_REJECTED + KV_EVENT_REJECT_REASONS.length;
const FLOAT_STRIDE = F_DROPPED_BATCHES + KV_BATCH_DROP_BOUNDS.length;
/**
 * Float64 header before the slots: stale_after_ms, written by the worker at
 * start (NaN until then); and the bound SUB socket's counts: publishers
 * connected (NaN while nothing is bound), connections refused past the
 * publisher limit, messages dropped unrouted by reason.
 */
const H_STALE_AFTER_MS = 0;
const H_LISTEN_PUBLISHERS = 1;
const H_LISTEN_REFUSED = 2;
const H_UNROUTED = 3;
const HEADER_FLOATS = H_UNROUTED + KV_UNROUTED_REASONS.length;

export class KvEventStats {
  readonly buffer: SharedArrayBuffer;
  private readonly ints: Int32Array;
  private readonly header: Float64Array;
  private readonly floats: Float64Array;

  /** `now` is the readers' clock: live() judges staleness with it. */
  constructor(
    readonly slots: number,
    buffer?: SharedArrayBuffer,
    private readonly now: () => number = Date.now,
  ) {
    const floatBytes = (HEADER_FLOATS + slots * FLOAT_STRIDE) * 8;
    this.buffer = buffer ?? new SharedArrayBuffer(floatBytes + slots * INT_STRIDE * 4);
    this.header = new Float64Array(this.buffer, 0, HEADER_FLOATS);
    this.floats = new Float64Array(this.buffer, HEADER_FLOATS * 8, slots * FLOAT_STRIDE);
    this.ints = new Int32Array(this.buffer, floatBytes, slots * INT_STRIDE);
    if (!buffer) {
      this.header[H_STALE_AFTER_MS] = NaN;
      this.header[H_LISTEN_PUBLISHERS] = NaN;
      for (let s = 0; s < slots; s++) {
        this.floats[s * FLOAT_STRIDE + F_LAST_HEARD] = NaN;
        this.floats[s * FLOAT_STRIDE + F_CAUGHT_UP] = NaN;
      }
    }
  }

  state(slot: number): KvStreamState {
    return (slot >= 0 && slot < this.slots ? Atomics.load(this.ints, slot * INT_STRIDE + I_STATE) : KV_STREAM.NONE) as KvStreamState;
  }

  /**
   * Whether the scorers may trust the endpoint's index: the worker says LIVE,
   * and, judged here on the reader's clock, it heard from the publisher and
   * was caught up with the stream within stale_after_ms. A worker that stops
   * refreshing (stalled, or buried in a backlog) thus reads as stale without
   * having to say so; until the worker has started, only its word counts.
   */
  live(slot: number): boolean {
    if (this.state(slot) !== KV_STREAM.LIVE) return false;
    const staleAfter = this.header[H_STALE_AFTER_MS]!;
    if (Number.isNaN(staleAfter)) return true;
    const now = this.now();
    const base = slot * FLOAT_STRIDE;
    return now - this.floats[base + F_LAST_HEARD]! <= staleAfter && now - this.floats[base + F_CAUGHT_UP]! <= staleAfter;
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

  rejected(slot: number, reason: KvEventRejectReason): number {
    return this.floats[slot * FLOAT_STRIDE + F_REJECTED + KV_EVENT_REJECT_REASONS.indexOf(reason)]!;
  }

  droppedBatches(slot: number, bound: KvBatchDropBound): number {
    return this.floats[slot * FLOAT_STRIDE + F_DROPPED_BATCHES + KV_BATCH_DROP_BOUNDS.indexOf(bound)]!;
  }

  /** Date.now() when the publisher last sent anything (heartbeat replies included); NaN when never. */
  lastHeardAt(slot: number): number {
    return this.floats[slot * FLOAT_STRIDE + F_LAST_HEARD]!;
  }

  /** Date.now() when the worker had last applied all it had received from the stream; NaN when never. */
  caughtUpAt(slot: number): number {
    return this.floats[slot * FLOAT_STRIDE + F_CAUGHT_UP]!;
  }

  /** The staleness bound the worker judges with (kv_events.stale_after_ms); NaN until the worker started. */
  get staleAfterMs(): number {
    return this.header[H_STALE_AFTER_MS]!;
  }

  /** Publishers connected to the bound SUB socket; NaN while none is bound. */
  get listenPublishers(): number {
    return this.header[H_LISTEN_PUBLISHERS]!;
  }

  /** Connections to the bound SUB socket closed on arrival, past its publisher limit. */
  get listenRefused(): number {
    return this.header[H_LISTEN_REFUSED]!;
  }

  unrouted(reason: KvUnroutedReason): number {
    return this.header[H_UNROUTED + KV_UNROUTED_REASONS.indexOf(reason)]!;
  }

  // ——— the KV-events worker only ———

  setListen(publishers: number, refused: number): void {
    this.header[H_LISTEN_PUBLISHERS] = publishers;
    this.header[H_LISTEN_REFUSED] = refused;
  }

  addUnrouted(reason: KvUnroutedReason, n = 1): void {
    this.header[H_UNROUTED + KV_UNROUTED_REASONS.indexOf(reason)]! += n;
  }

  /** A new stream in this slot (or none): counters back to zero. */
  reset(slot: number, state: KvStreamState): void {
    this.floats.fill(0, slot * FLOAT_STRIDE, (slot + 1) * FLOAT_STRIDE);
    this.floats[slot * FLOAT_STRIDE + F_LAST_HEARD] = NaN;
    this.floats[slot * FLOAT_STRIDE + F_CAUGHT_UP] = NaN;
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

  setCaughtUpAt(slot: number, ms: number): void {
    this.floats[slot * FLOAT_STRIDE + F_CAUGHT_UP] = ms;
  }

  setStaleAfterMs(ms: number): void {
    this.header[H_STALE_AFTER_MS] = ms;
  }

  addRejected(slot: number, reason: KvEventRejectReason, n = 1): void {
    this.floats[slot * FLOAT_STRIDE + F_REJECTED + KV_EVENT_REJECT_REASONS.indexOf(reason)]! += n;
  }

  addDroppedBatches(slot: number, bound: KvBatchDropBound, n: number): void {
    this.floats[slot * FLOAT_STRIDE + F_DROPPED_BATCHES + KV_BATCH_DROP_BOUNDS.indexOf(bound)]! += n;
  }
}
