/**
 * Pool saturation, one number per pool: the worse of queue pressure and KV
 * occupancy, since either alone misleads (a pool can be KV-full with short
 * queues, or queue-bound with an empty cache).
 *
 * Queue pressure comes from the router's own inflight count (dispatched plus
 * leased: a grant counts at once, so a simultaneous burst sees itself), which
 * never lags, against each endpoint's batch capacity. Capacity is not in the
 * engines' metric contract, so it is learned as the high-water mark of the
 * running count the engine reports (at least the configured initial guess).
 * Headroom lets inflight exceed the learned capacity by a fraction, which is
 * also how a higher capacity is discovered: an engine with free slots runs
 * the extra requests and its high-water mark rises, by up to (1 + headroom)
 * per scrape while demand lasts.
 *
 *   capacity_e   = max(initial_capacity, high_water_running_e)
 *   queue        = Σ inflight_e / (Σ capacity_e × (1 + headroom))
 *   kv           = mean KV usage of the pool's ready endpoints (stale → policy)
 *   saturation   = max(queue, kv)
 */

/** Per-endpoint learned batch capacity: the high-water mark of observed running. */
export class CapacityLearner {
  private readonly highWater: number[];

  constructor(
    endpoints: number,
    private readonly initialCapacity: number,
  ) {
    this.highWater = new Array<number>(endpoints).fill(0);
  }

  observe(index: number, running: number | undefined): void {
    if (running !== undefined && running > (this.highWater[index] ?? 0)) this.highWater[index] = running;
  }

  /** A new endpoint in this slot: learn its capacity afresh. */
  reset(index: number): void {
    this.highWater[index] = 0;
  }

  capacity(index: number): number {
    return Math.max(this.initialCapacity, this.highWater[index] ?? 0);
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
  const { room, kv } = poolRoom(members, capacity, opts);
  if (room === 0) return Infinity; // nothing ready: nothing may flow
  let inflight = 0;
  for (const m of members) if (m.ready) inflight += m.inflight;
  return Math.max(inflight / room, kv);
}

/**
 * How many requests a pool may hold while a band still flows, from the same
 * figures as poolSaturation: the band flows while max(held / room, kv) is
 * below its ceiling, where room = Σ capacity × (1 + headroom) over the ready
 * endpoints. So its limit is ⌈ceiling × room⌉ (held must stay below it), 0
 * when KV occupancy alone is at the ceiling or nothing is ready, and
 * unlimited (`unlimited`) for a ceiling above 1 while something is ready.
 *
 * Work-conserving (with `reserves`): a band whose ceiling is in (0, 1] may
 * go past its ceiling when the bands above it have not needed the room:
 * it leaves them `reserves[b]` places (their recent peak with a margin), so
 * its limit is max(⌈ceiling × room⌉, ⌊room − reserve⌋), and its KV bound
 * rises the same way to max(ceiling, 1 − reserve / room). A static ceiling
 * held back 40 % of the fleet for interactive traffic that used 3 %.
 *
 * The scheduler worker publishes these in the pool table; the main thread
 * claims against them without a message.
 */
export function bandLimits(
  members: readonly PoolMember[],
  capacity: (index: number) => number,
  opts: { headroom: number; staleMetrics: "ignore" | "saturated" },
  ceilings: readonly number[],
  unlimited: number,
  reserves?: readonly number[],
): number[] {
  const { room, kv } = poolRoom(members, capacity, opts);
  return ceilings.map((ceiling, b) => {
    if (room === 0) return 0;
    if (ceiling > 1) return unlimited;
    const fixed = kv >= ceiling ? 0 : Math.min(unlimited, Math.ceil(ceiling * room));
    const reserve = reserves?.[b];
    if (reserve === undefined || ceiling <= 0) return fixed;
    const lent = kv >= Math.max(ceiling, 1 - reserve / room) ? 0 : Math.max(0, Math.floor(room - reserve));
    return Math.max(fixed, lent);
  });
}

/** Σ capacity × (1 + headroom) over ready members, and their mean KV occupancy (stale → policy). */
function poolRoom(
  members: readonly PoolMember[],
  capacity: (index: number) => number,
  opts: { headroom: number; staleMetrics: "ignore" | "saturated" },
): { room: number; kv: number } {
  let cap = 0;
  let kvSum = 0;
  let kvN = 0;
  for (const m of members) {
    if (!m.ready) continue;
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
  return { room: cap * (1 + opts.headroom), kv: kvN === 0 ? 0 : kvSum / kvN };
}
