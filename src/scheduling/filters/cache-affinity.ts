/**
 * Filter `cache-affinity`: sticky until saturated. When some endpoints hold
 * at least `threshold` of the request's prompt (warm), only they stay, so a
 * conversation's next turn, or a shared prompt, goes where its prefix is
 * cached; when none is warm, or all are, every endpoint stays. A cold
 * endpoint rejoins when its uncached prompt tokens in flight are at least
 * `maxLeadTokens` below the least loaded warm endpoint's: the warm ones have
 * that much prefill work queued ahead (at peak prefill throughput, the TTFT a
 * request would lose by staying), and recomputing the prefix elsewhere is
 * then cheaper than waiting for it.
 *
 * Consumes the request's cached share on each endpoint (`kv-blocks` where the
 * engine's events are live, `prefix-hashes` otherwise, see cached-share.ts)
 * and `prefill-load`. Settings: `scheduling.cache_affinity`.
 */
import { cachedShare } from "../cached-share.ts";
import type { EndpointView, Filter, RequestView, SchedulingContext } from "../types.ts";

export const cacheAffinity: Filter = {
  name: "cache-affinity",
  consumes: ["kv-blocks", "prefix-hashes", "prefill-load"],
  filter(req: RequestView, endpoints: readonly EndpointView[], ctx: SchedulingContext): EndpointView[] {
    const { threshold, maxLeadTokens } = ctx.cacheAffinity;
    const warm = new Array<boolean>(endpoints.length);
    let warmCount = 0;
    let warmLeast = Infinity;
    for (let i = 0; i < endpoints.length; i++) {
      const e = endpoints[i]!;
      warm[i] = cachedShare(req, e, ctx) >= threshold;
      if (!warm[i]) continue;
      warmCount++;
      if (e.prefillTokens < warmLeast) warmLeast = e.prefillTokens;
    }
    if (warmCount === 0 || warmCount === endpoints.length) return endpoints.slice();
    const rejoinBelow = warmLeast - maxLeadTokens;
    return endpoints.filter((e, i) => warm[i] || e.prefillTokens <= rejoinBelow);
  },
};
