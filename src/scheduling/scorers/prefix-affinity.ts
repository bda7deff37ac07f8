/**
 * Scorer `prefix-affinity`: prefer the endpoint that last served the
 * request's prompt prefix, whose engine likely still holds it in its prefix
 * (KV) cache.
 *
 * Consumes `req.prefixHashes` (chained block hashes, see prefix-hash.ts) and
 * `ctx.prefixIndex`. score = matchedBlocks / prefixHashes.length; a request
 * without hashes (prompt shorter than one block) scores 0 everywhere, so the
 * other scorers decide.
 */
import type { EndpointView, RequestView, SchedulingContext, Scorer } from "../types.ts";

export const prefixAffinity: Scorer = {
  name: "prefix-affinity",
  consumes: ["prefix-hashes"],
  score: function prefixAffinityScore(req: RequestView, endpoints: readonly EndpointView[], ctx: SchedulingContext): number[] {
    const hashes = req.prefixHashes;
    const out = new Array<number>(endpoints.length);
    if (hashes.length === 0) return out.fill(0);
    for (let i = 0; i < endpoints.length; i++) {
      out[i] = ctx.prefixIndex.matchedBlocks(hashes, endpoints[i]!.index) / hashes.length;
    }
    return out;
  },
};
