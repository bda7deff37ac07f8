/**
 * Scorer `precise-prefix`: prefer the endpoint whose engine holds the most
 * of the request's prompt in its KV cache, as the engine's own KV-cache
 * events say (vLLM's BlockStored / BlockRemoved, indexed by token ids).
 *
 * Consumes `req.tokenBlockKeys` (the prompt's token ids, from the engine's
 * /tokenize, as 16-token keys), `ctx.kvIndex`, and for endpoints without a
 * live event stream the stand-in's inputs. For an endpoint whose stream is
 * live: score = matchedBlocks / tokenBlockKeys.length, the fraction of the
 * request's blocks the engine holds, counted from the first block and
 * stopping at the first it lacks (longest prefix first, as the engine's own
 * lookup). An endpoint whose stream is stale or absent — and every endpoint
 * when the request has no token ids — gets the estimating scorer's score
 * instead (`ctx.preciseStandIn`: prefix-affinity, or prefix-rendezvous with
 * several gateways), so engines that publish nothing are routed as before.
 */
import type { EndpointView, RequestView, SchedulingContext, Scorer } from "../types.ts";
import { prefixAffinity } from "./prefix-affinity.ts";
import { prefixRendezvous } from "./prefix-rendezvous.ts";

export const precisePrefix: Scorer = {
  name: "precise-prefix",
  consumes: ["kv-blocks", "prefix-hashes", "engine-load"],
  score: function precisePrefixScore(req: RequestView, endpoints: readonly EndpointView[], ctx: SchedulingContext): number[] {
    const keys = req.tokenBlockKeys;
    const out = new Array<number>(endpoints.length);
    let standIn: number[] | undefined;
    for (let i = 0; i < endpoints.length; i++) {
      const e = endpoints[i]!;
      if (keys !== undefined && keys.length > 0 && ctx.kvIndex.live(e.index)) {
        out[i] = ctx.kvIndex.matchedBlocks(keys, e.index) / keys.length;
        continue;
      }
      standIn ??= (ctx.preciseStandIn === "prefix-rendezvous" ? prefixRendezvous : prefixAffinity).score(req, endpoints, ctx);
      out[i] = standIn[i] ?? 0;
    }
    return out;
  },
};
