/**
 * Scorer `kv-cache`: more free KV cache is better.
 *
 * Consumes `kvUsage` (engine-reported KV-cache usage in [0,1], e.g.
 * vllm:kv_cache_usage_perc). score = 1 - kvUsage, clamped to [0,1]. An
 * absolute formula, not relative to the other candidates: 90% full is
 * nearly out of room however full the others are. Absent or stale usage
 * scores 0, as if full, so an endpoint nothing has reported never wins on
 * this scorer over one known to have room. Tiered by free batch slot like
 * every load scorer (free-slot-tiers.ts) when the candidates mix endpoints
 * with and without one.
 */
import { tierByFreeSlot } from "../free-slot-tiers.ts";
import type { EndpointView, RequestView, SchedulingContext, Scorer } from "../types.ts";

/** Score given to an endpoint whose engine has not reported KV usage. */
const KV_CACHE_ABSENT_SCORE = 0;

export const kvCache: Scorer = {
  name: "kv-cache",
  consumes: ["engine-load", "inflight"],
  score: function kvCacheScore(_req: RequestView, endpoints: readonly EndpointView[], _ctx: SchedulingContext): number[] {
    const out = new Array<number>(endpoints.length);
    for (let i = 0; i < endpoints.length; i++) {
      const u = endpoints[i]!.kvUsage;
      if (u === undefined || !Number.isFinite(u)) out[i] = KV_CACHE_ABSENT_SCORE;
      else out[i] = u <= 0 ? 1 : u >= 1 ? 0 : 1 - u;
    }
    return tierByFreeSlot(endpoints, out);
  },
};
