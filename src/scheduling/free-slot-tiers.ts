/**
 * The load scorers' common rule (queue-depth, kv-cache, inflight): load
 * alone never sends a request to wait in one engine's queue while another
 * has a batch slot free. When the candidates are a mix of endpoints with a
 * free slot (the router's own in-flight count below the learned capacity;
 * unknown capacity counts as free) and endpoints without one, each load
 * scorer maps the free ones into [0.5, 1] and the full ones into [0, 0.5),
 * keeping its own order within each group. A single scorer's tiers are not
 * enough: queue-depth reads the engine's waiting count a poll old, and with
 * its weight it used to outvote inflight's tiers (an engine at 33 of 32 in
 * flight chosen over one at 27 of 32 for an interactive request, which then
 * waited 0.1–0.6 s in the engine's queue). With every load scorer tiered,
 * the weighted load total of a free endpoint is at least half the load
 * weights and a full one's below that. Prefix affinity is not a load scorer
 * and may still outweigh them.
 */
import type { EndpointView } from "./types.ts";

/** The most a full endpoint scores in a mix: below 0.5, the least a free one scores. */
const FULL_BELOW = 0.499;

/** In flight below the learned batch capacity (unknown capacity: counted free, as before it was learned). */
function hasFreeSlot(e: EndpointView): boolean {
  return e.capacity === undefined || e.inflight < e.capacity;
}

/** `scores` (one per endpoint, in [0,1]) tiered in place when the candidates mix free and full endpoints; returned for chaining. */
export function tierByFreeSlot(endpoints: readonly EndpointView[], scores: number[]): number[] {
  let free = 0;
  for (const e of endpoints) if (hasFreeSlot(e)) free++;
  if (free === 0 || free === endpoints.length) return scores;
  for (let i = 0; i < endpoints.length; i++) {
    const s = scores[i]!;
    scores[i] = hasFreeSlot(endpoints[i]!) ? 0.5 + s / 2 : Math.min(s / 2, FULL_BELOW);
  }
  return scores;
}
