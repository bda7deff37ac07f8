/**
 * The shared tables of a gateway, each in a SharedArrayBuffer read and written
 * by the main thread, the scheduler worker and the health worker:
 *
 * - EndpointTable: one row (slot) per endpoint, fixed capacity, so endpoints
 *   come and go at run time without resizing anything another thread holds;
 * - PoolTable: per pool, the requests it holds, what is queued for it, and the
 *   flow limit of each admission band (published by the scheduler worker);
 * - AdmissionStatsTable: queue depth per band and saturation per pool, for the
 *   metrics collector;
 * - Signals: a few words threads use to tell each other "something changed".
 *
 * Each field has one writer (noted below) unless it is a counter changed with
 * Atomics.add / compareExchange by several. Float64 fields (KV usage,
 * timestamps) use plain aligned 8-byte stores, single-copy atomic on every
 * platform Bun runs on; a stale read there only mis-ranks one decision.
 */

/** Int32 fields of an endpoint row, with their writer. */
export const I = {
  /** main and scheduler add 1 when they claim the endpoint for a request; main subtracts 1 when the request lets go. */
  INFLIGHT: 0,
  /** main: SLOT_FREE, SLOT_ACTIVE or SLOT_RETIRING. */
  SLOT: 1,
  /** health: /health up and /v1/models lists the served models. */
  READY: 2,
  /** health: /health answered 2xx. */
  HEALTHY: 3,
  /** health: engine waiting requests, -1 when absent. */
  WAITING: 4,
  /** health: engine running requests, -1 when absent. */
  RUNNING: 5,
  /** main (control plane): 1 while draining. */
  DRAINING: 6,
  /** main (and both claimers for the probe slot): see CIRCUIT_* below. */
  CIRCUIT: 7,
  /** health: a GPU behind the endpoint is faulted. */
  GPU_FAULTED: 8,
  /** health: detected metric flavor (FLAVOR_CODES). */
  FLAVOR: 9,
  /** health: consecutive failed polls. */
  POLL_FAILURES: 10,
  /** scheduler: the endpoint's learned batch capacity (see src/admission/pool-saturation.ts). */
  CAPACITY: 11,
  /** main: index of the endpoint's pool in the PoolTable. */
  POOL: 12,
  /**
   * main and scheduler add a request's uncached prompt tokens (its estimate
   * less what the endpoint likely holds) when they claim the endpoint for it,
   * when the profile reads `prefill-load`; main subtracts them at the
   * request's first token, or when it lets go before one.
   */
  PREFILL_TOKENS: 13,
  /**
   * main (and both claimers for probe slots): the circuit of the endpoint's
   * p-th served model, at MODEL_CIRCUITS + p (CIRCUIT_* values): a 429, a
   * 5xx or a timeout counts against the model it happened to, so one model
   * of a shared URL cooling down leaves the others in rotation.
   */
  MODEL_CIRCUITS: 16,
} as const;
/** Models of one endpoint with a circuit of their own; beyond them, model failures count against the endpoint. */
export const MAX_MODEL_CIRCUITS = 16;
const INT_STRIDE = I.MODEL_CIRCUITS + MAX_MODEL_CIRCUITS;

/** The circuit field of an endpoint's model at position `pos` in its model list, or -1 (the endpoint's own circuit then stands for it). */
export function modelCircuitField(pos: number): number {
  return pos >= 0 && pos < MAX_MODEL_CIRCUITS ? I.MODEL_CIRCUITS + pos : -1;
}

/** Float64 fields of a row, with their writer. */
export const F = {
  /** health: KV-cache usage in [0,1], NaN when absent. */
  KV_USAGE: 0,
  /** health: Date.now() of the last good /metrics, NaN when never. */
  METRICS_AT: 1,
  /** health: how long the last poll took, ms. */
  POLL_MS: 2,
} as const;
const FLOAT_STRIDE = 4;

/** A slot nothing uses. */
export const SLOT_FREE = 0;
/** A slot holding a live endpoint. */
export const SLOT_ACTIVE = 1;
/** A removed endpoint whose requests are still finishing; reused once none is left. */
export const SLOT_RETIRING = 2;

export const CIRCUIT_CLOSED = 0;
export const CIRCUIT_OPEN = 1;
/** Open period over: the next grant takes the single probe slot (→ PROBING). */
export const CIRCUIT_HALF_OPEN = 2;
/** One probe request is in flight; no other request goes there. */
export const CIRCUIT_PROBING = 3;

export const FLAVOR_CODES = ["unknown", "vllm-v0", "vllm-v1", "sglang"] as const;

export class EndpointTable {
  readonly buffer: SharedArrayBuffer;
  /** Capacity in slots (not all need be active). */
  readonly rows: number;
  readonly ints: Int32Array;
  readonly floats: Float64Array;

  constructor(rows: number, buffer?: SharedArrayBuffer) {
    this.rows = rows;
    const floatBytes = rows * FLOAT_STRIDE * 8;
    const intBytes = rows * INT_STRIDE * 4;
    this.buffer = buffer ?? new SharedArrayBuffer(floatBytes + intBytes);
    if (this.buffer.byteLength < floatBytes + intBytes) throw new Error("endpoint table buffer too small");
    this.floats = new Float64Array(this.buffer, 0, rows * FLOAT_STRIDE);
    this.ints = new Int32Array(this.buffer, floatBytes, rows * INT_STRIDE);
    if (!buffer) for (let r = 0; r < rows; r++) this.resetRow(r);
  }

  /** Absent engine figures, nothing in flight, closed circuit: the state of a new endpoint (main only, before it is announced). */
  resetRow(row: number): void {
    const base = row * INT_STRIDE;
    for (let f = 0; f < INT_STRIDE; f++) Atomics.store(this.ints, base + f, 0);
    Atomics.store(this.ints, base + I.WAITING, -1);
    Atomics.store(this.ints, base + I.RUNNING, -1);
    this.floats[row * FLOAT_STRIDE + F.KV_USAGE] = NaN;
    this.floats[row * FLOAT_STRIDE + F.METRICS_AT] = NaN;
    this.floats[row * FLOAT_STRIDE + F.POLL_MS] = NaN;
  }

  getInt(row: number, field: number): number {
    return Atomics.load(this.ints, row * INT_STRIDE + field);
  }
  setInt(row: number, field: number, value: number): void {
    Atomics.store(this.ints, row * INT_STRIDE + field, value);
  }
  addInt(row: number, field: number, delta: number): number {
    return Atomics.add(this.ints, row * INT_STRIDE + field, delta) + delta;
  }
  /** Atomically replace `expected` by `value`; true when it did. */
  casInt(row: number, field: number, expected: number, value: number): boolean {
    return Atomics.compareExchange(this.ints, row * INT_STRIDE + field, expected, value) === expected;
  }
  getFloat(row: number, field: number): number {
    return this.floats[row * FLOAT_STRIDE + field]!;
  }
  setFloat(row: number, field: number, value: number): void {
    this.floats[row * FLOAT_STRIDE + field] = value;
  }

  /** An absent-aware read of a -1-means-absent int field. */
  optionalInt(row: number, field: number): number | undefined {
    const v = this.getInt(row, field);
    return v < 0 ? undefined : v;
  }
}

/**
 * Int32 fields of a pool row: HELD, then per band its flow limit, what waits
 * in that band or a higher one, what the band holds, and the band's peak hold
 * since the scheduler last looked.
 */
const P = {
  /** main and scheduler: requests holding an endpoint of this pool (the sum of its endpoints' INFLIGHT, kept as one counter so a claim is one compare-and-swap). */
  HELD: 0,
  /** scheduler: band b may take a request while HELD is below LIMITS + b (0: it may not flow). */
  LIMITS: 1,
} as const;

/** The limit of a band that never waits (ceiling above 1), or of every band with admission off. */
export const UNLIMITED = 0x7fffffff;

export class PoolTable {
  readonly buffer: SharedArrayBuffer;
  readonly ints: Int32Array;
  private readonly stride: number;
  /** scheduler: requests waiting for this pool in band b or higher, at AHEAD + b. */
  private readonly ahead: number;
  /** main and scheduler: requests of band b holding an endpoint of this pool, at BAND_HELD + b. */
  private readonly bandHeld: number;
  /** claimers raise it, the scheduler resets it: the most band b held since, at BAND_PEAK + b. */
  private readonly bandPeak: number;

  constructor(
    readonly pools: number,
    readonly bands: number,
    buffer?: SharedArrayBuffer,
  ) {
    this.ahead = P.LIMITS + bands;
    this.bandHeld = this.ahead + bands;
    this.bandPeak = this.bandHeld + bands;
    this.stride = this.bandPeak + bands;
    this.buffer = buffer ?? new SharedArrayBuffer(pools * this.stride * 4);
    this.ints = new Int32Array(this.buffer, 0, pools * this.stride);
  }

  held(pool: number): number {
    return Atomics.load(this.ints, pool * this.stride + P.HELD);
  }
  limit(pool: number, band: number): number {
    return Atomics.load(this.ints, pool * this.stride + P.LIMITS + band);
  }
  setLimit(pool: number, band: number, n: number): void {
    Atomics.store(this.ints, pool * this.stride + P.LIMITS + band, n);
  }
  /** Requests waiting for this pool in band `band` or a higher one (lower index). */
  queuedAhead(pool: number, band: number): number {
    return Atomics.load(this.ints, pool * this.stride + this.ahead + band);
  }
  /** Requests waiting for this pool in any band. */
  queued(pool: number): number {
    return this.queuedAhead(pool, this.bands - 1);
  }
  /** Publish the queue depths of one pool, per band (the scheduler worker only). */
  setQueued(pool: number, perBand: readonly number[]): void {
    let sum = 0;
    for (let b = 0; b < this.bands; b++) {
      sum += perBand[b] ?? 0;
      Atomics.store(this.ints, pool * this.stride + this.ahead + b, sum);
    }
  }
  /** Requests of one band holding an endpoint of this pool. */
  bandHeldNow(pool: number, band: number): number {
    return Atomics.load(this.ints, pool * this.stride + this.bandHeld + band);
  }
  /** The most the band held since the scheduler last took the peak. */
  bandPeakNow(pool: number, band: number): number {
    return Math.max(0, Atomics.load(this.ints, pool * this.stride + this.bandPeak + band));
  }
  /** The most the band held since the last call, which restarts the count from what it holds now (the scheduler worker only). */
  takeBandPeak(pool: number, band: number): number {
    const at = pool * this.stride;
    return Math.max(0, Atomics.exchange(this.ints, at + this.bandPeak + band, Atomics.load(this.ints, at + this.bandHeld + band)));
  }

  /**
   * Take one place in the pool for a request of `band` if the band's limit
   * allows it: a compare-and-swap loop on HELD, so the main thread and the
   * scheduler worker claiming at once never both pass a limit only one fits
   * under. `tries` bounds the loop; false means over the limit or contended.
   */
  tryClaim(pool: number, band: number, tries = 4): boolean {
    const at = pool * this.stride;
    const limit = Atomics.load(this.ints, at + P.LIMITS + band);
    for (let i = 0; i < tries; i++) {
      const held = Atomics.load(this.ints, at + P.HELD);
      if (held >= limit) return false;
      if (Atomics.compareExchange(this.ints, at + P.HELD, held, held + 1) === held) {
        this.countBand(at, band, 1);
        return true;
      }
    }
    return false;
  }

  /** Take a place whatever the limits (retries and fallbacks of an admitted request, admission off). */
  take(pool: number, band: number): void {
    const at = pool * this.stride;
    Atomics.add(this.ints, at + P.HELD, 1);
    this.countBand(at, band, 1);
  }

  /** Give a place back. */
  release(pool: number, band: number): void {
    const at = pool * this.stride;
    Atomics.sub(this.ints, at + P.HELD, 1);
    this.countBand(at, band, -1);
  }

  private countBand(at: number, band: number, delta: number): void {
    const now = Atomics.add(this.ints, at + this.bandHeld + band, delta) + delta;
    if (delta <= 0) return;
    // Raise the peak to `now` unless it is higher already (a compare-and-swap max).
    const peakAt = at + this.bandPeak + band;
    for (let peak = Atomics.load(this.ints, peakAt); peak < now; peak = Atomics.load(this.ints, peakAt)) {
      if (Atomics.compareExchange(this.ints, peakAt, peak, now) === peak) return;
    }
  }
}

/**
 * Admission figures the scheduler worker publishes for the metrics collector:
 * queue depth per band and saturation per pool (Float64, written by the
 * scheduler worker only).
 */
export class AdmissionStatsTable {
  readonly buffer: SharedArrayBuffer;
  private readonly values: Float64Array;

  constructor(
    readonly bands: number,
    readonly pools: number,
    buffer?: SharedArrayBuffer,
  ) {
    this.buffer = buffer ?? new SharedArrayBuffer((bands + pools) * 8);
    this.values = new Float64Array(this.buffer);
    if (!buffer) this.values.fill(NaN, bands);
  }

  setDepth(band: number, depth: number): void {
    this.values[band] = depth;
  }
  depth(band: number): number {
    return this.values[band] ?? 0;
  }
  setSaturation(pool: number, value: number): void {
    this.values[this.bands + pool] = value;
  }
  /** NaN until the worker computed it. */
  saturation(pool: number): number {
    return this.values[this.bands + pool] ?? NaN;
  }
}

/** Words of the Signals table. */
export const S = {
  /** health: bumped (Atomics.add + notify) after each engine poll it wrote, so the scheduler recomputes flow limits at once. */
  METRICS_EPOCH: 0,
} as const;

export class Signals {
  readonly buffer: SharedArrayBuffer;
  readonly ints: Int32Array;

  constructor(buffer?: SharedArrayBuffer) {
    this.buffer = buffer ?? new SharedArrayBuffer(4 * 4);
    this.ints = new Int32Array(this.buffer);
  }

  bump(word: number): void {
    Atomics.add(this.ints, word, 1);
    Atomics.notify(this.ints, word);
  }

  get(word: number): number {
    return Atomics.load(this.ints, word);
  }
}
