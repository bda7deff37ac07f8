/**
 * Scorer `token-load`: the least prefill work wins, this request's own
 * included. Load on an endpoint is its uncached prompt tokens in flight (the
 * router's own count of prompt tokens sent there and not yet past their
 * first token, less what each likely found cached) plus the tokens of this
 * prompt it would have to compute: prompt × (1 − its cached share). A warm
 * endpoint thus looks lighter for this request by what it holds, and a busy
 * one heavier by what it still has to prefill, which is what delays a first
 * token on long prompts (where request counts say little: one 100,000-token
 * prompt is more work than fifty short ones).
 *
 * score = 1 − (load − min) / (max + 1) over the candidates: the least loaded
 * scores 1, all equal → all 1.
 *
 * Consumes `prefill-load`, and the cached share's inputs (`kv-blocks`,
 * `prefix-hashes`; see cached-share.ts).
 */
import { uncachedTokens } from "../cached-share.ts";
import type { EndpointView, RequestView, SchedulingContext, Scorer } from "../types.ts";

export const tokenLoad: Scorer = {
  name: "token-load",
  consumes: ["prefill-load", "kv-blocks", "prefix-hashes"],
  score: function tokenLoadScore(req: RequestView, endpoints: readonly EndpointView[], ctx: SchedulingContext): number[] {
    const load = new Array<number>(endpoints.length);
    let min = Infinity;
    let max = 0;
    for (let i = 0; i < endpoints.length; i++) {
      const e = endpoints[i]!;
      const v = (e.prefillTokens > 0 ? e.prefillTokens : 0) + uncachedTokens(req, e, ctx);
      load[i] = v;
      if (v > max) max = v;
      if (v < min) min = v;
    }
    for (let i = 0; i < load.length; i++) load[i] = 1 - (load[i]! - min) / (max + 1);
    return load;
  },
};
