/**
 * Per pool, until when its GPUs count as saturated (sustained): a
 * SharedArrayBuffer the health worker writes after every GPU sample and the
 * main thread reads without a message (the shed gate, the batch runner, the
 * gauge). Indexed by the pool's row in the PoolTable.
 *
 * One Float64 per pool holding a deadline rather than a flag: the writer
 * publishes the moment its evidence turns stale, so a health worker that
 * stops writing (stalled, stopped) fails open by itself at that moment —
 * never a reason to shed. Aligned 8-byte stores are single-copy atomic on
 * every platform Bun runs on (as for the endpoint table's Float64 fields).
 */
export class GpuSaturationTable {
  readonly buffer: SharedArrayBuffer;
  private readonly until: Float64Array;

  constructor(
    readonly pools: number,
    buffer?: SharedArrayBuffer,
  ) {
    this.buffer = buffer ?? new SharedArrayBuffer(pools * 8);
    this.until = new Float64Array(this.buffer, 0, pools);
  }

  /** The health worker only: saturated until `untilMs` (Date.now() time); 0 = not saturated. */
  publish(pool: number, untilMs: number): void {
    if (pool >= 0 && pool < this.pools) this.until[pool] = untilMs;
  }

  saturated(pool: number, nowMs: number): boolean {
    return pool >= 0 && pool < this.pools && this.until[pool]! > nowMs;
  }
}
