/**
 * The endpoint table: one row per configured endpoint in a SharedArrayBuffer,
 * shared by the main thread, the scheduler worker and the health worker.
 * Each field has one writer (noted below) so no thread waits on another; Int32
 * fields go through Atomics. Float64 fields (KV usage, timestamps) use plain
 * aligned 8-byte stores, which are single-copy atomic on every platform Bun
 * runs on; a stale read there only mis-ranks one decision.
 */

/** Int32 fields of a row, with their writer. */
export const I = {
  /** main: dispatched and not yet finished. */
  INFLIGHT: 0,
  /** scheduler adds at grant, main subtracts at dispatch or abandonment. */
  LEASED: 1,
  /** health: /health up and /v1/models lists the served models. */
  READY: 2,
  /** health: /health answered 2xx. */
  HEALTHY: 3,
  /** health: engine waiting requests, -1 when absent. */
  WAITING: 4,
  /** health: engine running requests, -1 when absent. */
  RUNNING: 5,
  /** control plane: 1 while draining. */
  DRAINING: 6,
  /** main (and scheduler for the probe slot): see CIRCUIT_* below. */
  CIRCUIT: 7,
  /** health: a GPU behind the endpoint is faulted. */
  GPU_FAULTED: 8,
  /** health: detected metric flavor (FLAVOR_CODES). */
  FLAVOR: 9,
  /** health: consecutive failed polls. */
  POLL_FAILURES: 10,
  /** scheduler: the endpoint's learned batch capacity (see src/admission/saturation.ts). */
  CAPACITY: 11,
} as const;
const INT_STRIDE = 16;

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

export const CIRCUIT_CLOSED = 0;
export const CIRCUIT_OPEN = 1;
/** Open period over: the next grant takes the single probe slot (→ PROBING). */
export const CIRCUIT_HALF_OPEN = 2;
/** One probe request is in flight; no other request goes there. */
export const CIRCUIT_PROBING = 3;

export const FLAVOR_CODES = ["unknown", "vllm-v0", "vllm-v1", "sglang"] as const;
export type FlavorName = (typeof FLAVOR_CODES)[number];

export class EndpointTable {
  readonly buffer: SharedArrayBuffer;
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
    if (!buffer) {
      for (let r = 0; r < rows; r++) {
        this.ints[r * INT_STRIDE + I.WAITING] = -1;
        this.ints[r * INT_STRIDE + I.RUNNING] = -1;
        this.floats[r * FLOAT_STRIDE + F.KV_USAGE] = NaN;
        this.floats[r * FLOAT_STRIDE + F.METRICS_AT] = NaN;
      }
    }
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
