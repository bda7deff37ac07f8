/**
 * Pool saturation, one number per pool: the worse of queue pressure and KV
 * occupancy, since either alone misleads (a pool can be KV-full with short
 * queues, or queue-bound with an empty cache).
 *
 * Queue pressure comes from the router's own inflight count (dispatched plus
 * leased: a grant counts at once, so a simultaneous burst sees itself), which
 * never lags, against each endpoint's batch capacity. Capacity is not in the
 * engines' metric contract, so it is learned: the highest running count seen
 * while the engine also had requests waiting is its real batch limit. Until
 * an engine has been seen queueing, its limit is unknown and the estimate
 * keeps room to grow — twice the highest running count seen (at least the
 * configured initial guess) — so traffic can push the engine until it queues
 * and reveals its limit (a few scrape intervals), instead of being capped
 * forever at a guess.
 *
 *   capacity_e   = learned_e ?? max(initial_capacity, 2 × high_water_running_e)
 *   queue        = Σ inflight_e / (Σ capacity_e × (1 + headroom))
 *   kv           = mean KV usage of the pool's ready endpoints (stale → policy)
 *   saturation   = max(queue, kv)
 */

/** Room an endpoint whose limit is not known yet gets over its high-water mark. */
const UNLEARNED_GROWTH = 2;

export interface CapacityObservation {
  running: number | undefined;
  waiting: number | undefined;
}

/** Per-endpoint learned batch capacity. */
export class CapacityLearner {
  private readonly highWater: number[];
  private readonly learned: (number | undefined)[];

  constructor(endpoints: number, private readonly initialCapacity: number) {
    this.highWater = new Array<number>(endpoints).fill(0);
    this.learned = new Array<number | undefined>(endpoints).fill(undefined);
  }

  observe(index: number, o: CapacityObservation): void {
    if (o.running === undefined) return;
    if (o.running > (this.highWater[index] ?? 0)) this.highWater[index] = o.running;
    // Requests waiting while this many run: the engine is at its batch limit.
    if (o.waiting !== undefined && o.waiting > 0 && o.running > 0) {
      this.learned[index] = Math.max(this.learned[index] ?? 0, o.running);
    }
  }

  capacity(index: number): number {
    return this.learned[index] ?? Math.max(this.initialCapacity, UNLEARNED_GROWTH * (this.highWater[index] ?? 0));
  }

  isLearned(index: number): boolean {
    return this.learned[index] !== undefined;
  }
}

export interface PoolMember {
  index: number;
  ready: boolean;
  inflight: number;
  /** undefined when absent or stale. */
  kvUsage: number | undefined;
  /** The endpoint's metrics are older than the stale limit (or never came). */
  stale: boolean;
}

export function poolSaturation(
  members: readonly PoolMember[],
  capacity: (index: number) => number,
  opts: { headroom: number; staleMetrics: "ignore" | "saturated" },
): number {
  let inflight = 0;
  let cap = 0;
  let kvSum = 0;
  let kvN = 0;
  for (const m of members) {
    if (!m.ready) continue;
    inflight += m.inflight;
    cap += capacity(m.index);
    if (m.stale) {
      if (opts.staleMetrics === "saturated") {
        kvSum += 1;
        kvN++;
      }
    } else if (m.kvUsage !== undefined) {
      kvSum += m.kvUsage;
      kvN++;
    }
  }
  if (cap === 0) return Infinity; // nothing ready: nothing may flow
  const queue = inflight / (cap * (1 + opts.headroom));
  const kv = kvN === 0 ? 0 : kvSum / kvN;
  return Math.max(queue, kv);
}
