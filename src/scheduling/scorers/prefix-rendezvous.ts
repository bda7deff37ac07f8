/**
 * Scorer `prefix-rendezvous`: the same prompt prefix goes to the same
 * replica from every gateway, with nothing shared between them.
 * `prefix-affinity` remembers where this gateway sent a prefix; with several
 * gateways behind a load balancer each would learn its own, different
 * answer, and the engines' prefix caches would hold every prefix N times.
 *
 * Rendezvous (highest-random-weight) hashing: weight(e) = wyhash(e.id, seeded
 * by the first block's hash); the candidate with the highest weight scores 1,
 * the others 0. Every gateway that sees the same candidates (same ids, same
 * readiness) picks the same one, and when a candidate leaves only its
 * prefixes move. The first block is used so that a conversation's turns,
 * and requests sharing a system prompt, land together; the load scorers'
 * weights decide when that replica is too busy to be worth it. No hashes
 * (prompt shorter than one block): 0 everywhere. A winner whose engine has
 * reported nothing (no queue, no KV usage: absent or stale) scores 0 too,
 * so a replica nobody has heard from is never drawn traffic by it.
 */
import type { EndpointView, RequestView, SchedulingContext, Scorer } from "../types.ts";

export const prefixRendezvous: Scorer = {
  name: "prefix-rendezvous",
  consumes: ["prefix-hashes", "engine-load"],
  score: function prefixRendezvousScore(req: RequestView, endpoints: readonly EndpointView[], _ctx: SchedulingContext): number[] {
    const out = new Array<number>(endpoints.length).fill(0);
    const first = req.prefixHashes[0];
    if (first === undefined || endpoints.length === 0) return out;
    const seed = BigInt(first);
    let best = -1n;
    let at = 0;
    for (let i = 0; i < endpoints.length; i++) {
      const w = Bun.hash.wyhash(endpoints[i]!.id, seed);
      // Ties (never in practice) go to the smaller id, so every gateway breaks them alike.
      if (w > best || (w === best && endpoints[i]!.id < endpoints[at]!.id)) {
        best = w;
        at = i;
      }
    }
    const w = endpoints[at]!;
    if (w.waiting !== undefined || w.kvUsage !== undefined) out[at] = 1;
    return out;
  },
};
