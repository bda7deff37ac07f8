/**
 * Each pool's admission share of this gateway, in shared memory:
 * with several gateways in front of one fleet, each admits against its share
 * of a pool's capacity. The main thread writes the shares (from the demand
 * exchange through Redis); the scheduler worker reads them when it publishes
 * the band limits and scales them. Parts per million in an Int32Array with
 * Atomics: one writer, one reader, never torn. A gateway alone has share 1.
 */

const PPM = 1_000_000;

export class PoolShareTable {
  readonly buffer: SharedArrayBuffer;
  readonly #ppm: Int32Array;

  constructor(
    readonly pools: number,
    buffer?: SharedArrayBuffer,
  ) {
    this.buffer = buffer ?? new SharedArrayBuffer(pools * 4);
    this.#ppm = new Int32Array(this.buffer, 0, pools);
    if (buffer === undefined) this.#ppm.fill(PPM);
  }

  /** In (0, 1]; 1 for a pool out of range. */
  get(pool: number): number {
    if (pool < 0 || pool >= this.pools) return 1;
    return Atomics.load(this.#ppm, pool) / PPM;
  }

  /** Clamped to [1 ppm, 1]: a gateway's share never reaches 0, so it can always admit something. */
  set(pool: number, share: number): void {
    if (pool < 0 || pool >= this.pools) return;
    const ppm = Number.isFinite(share) ? Math.round(share * PPM) : PPM;
    Atomics.store(this.#ppm, pool, Math.min(PPM, Math.max(1, ppm)));
  }
}

/**
 * A band limit scaled by this gateway's share: ⌈limit × share⌉, so a share
 * of a non-zero limit is at least 1 place; 0 (nothing may flow) and
 * `unlimited` (a ceiling above 1) stay as they are.
 */
export function scaleLimit(limit: number, share: number, unlimited: number): number {
  if (limit <= 0 || limit >= unlimited || !(share < 1)) return limit;
  return Math.max(1, Math.ceil(limit * share));
}
