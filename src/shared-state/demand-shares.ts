/**
 * Admission shares from demand, pure: every gateway publishes, per
 * pool, how much it wants (its peak of held plus queued requests over the
 * last interval); each takes share = (own + floor) / Σ (each + floor) of every
 * pool's capacity. The floor keeps a quiet gateway's share above zero (its
 * next request can flow at once) and splits capacity evenly when all are
 * idle. Every gateway computes from the same published figures, so the shares
 * add up to 1.
 */

/** Demand added to every gateway's figure: one request's worth. */
export const DEMAND_FLOOR = 1;

export interface GatewayDemand {
  gateway: string;
  /** Per pool name. */
  pools: Readonly<Record<string, number>>;
}

/** This gateway's share of each of `pools`: 1 when no other gateway is known. */
export function computeShares(me: string, demands: readonly GatewayDemand[], pools: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  const others = demands.filter((d) => d.gateway !== me);
  const mine = demands.find((d) => d.gateway === me);
  for (const pool of pools) {
    if (others.length === 0) {
      out[pool] = 1;
      continue;
    }
    const own = demandOf(mine, pool) + DEMAND_FLOOR;
    let total = own;
    for (const d of others) total += demandOf(d, pool) + DEMAND_FLOOR;
    out[pool] = own / total;
  }
  return out;
}

/** A published figure, or 0 for one that is missing or not a non-negative number (another gateway's bug must not break this one). */
function demandOf(d: GatewayDemand | undefined, pool: string): number {
  const v = d?.pools[pool];
  return typeof v === "number" && v > 0 && Number.isFinite(v) ? v : 0;
}
