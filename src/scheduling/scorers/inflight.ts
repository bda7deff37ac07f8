/**
 * Scorer `inflight`: fewer requests the router itself has in flight to the
 * endpoint is better.
 *
 * Consumes `inflight` (the router's own dispatched + leased count, never
 * stale). score = 1 - (inflight - min) / (max + 1) over the candidates: the
 * least loaded scores 1, all equal → all 1, and the spread is relative to
 * the load level (same formula as queue-depth). This is the one load signal
 * that reacts within a request, before the engine's next /metrics poll
 * shows the new work.
 *
 * Capacity-aware when the candidates are a mix of endpoints with a free
 * batch slot (inflight below their learned capacity) and endpoints without
 * one: the free ones score in [0.5, 1] and the full ones in [0, 0.5), each
 * by the same relative formula (free-slot-tiers.ts, shared with the other
 * load scorers). Otherwise 30 vs 32 in flight differ by 2/33, too little
 * against metrics a poll old, and a request could be sent to queue inside an
 * engine while another has a slot free. When all are free or all are full,
 * the plain formula is the score.
 */
import { tierByFreeSlot } from "../free-slot-tiers.ts";
import type { EndpointView, RequestView, SchedulingContext, Scorer } from "../types.ts";

export const inflight: Scorer = {
  name: "inflight",
  consumes: ["inflight"],
  score: function inflightScore(_req: RequestView, endpoints: readonly EndpointView[], _ctx: SchedulingContext): number[] {
    let min = Infinity;
    let max = 0;
    for (const e of endpoints) {
      const n = e.inflight > 0 ? e.inflight : 0; // also maps a corrupt NaN count to 0
      if (n > max) max = n;
      if (n < min) min = n;
    }
    const out = new Array<number>(endpoints.length);
    for (let i = 0; i < endpoints.length; i++) {
      const n = endpoints[i]!.inflight;
      const s = 1 - ((n > 0 ? n : 0) - min) / (max + 1);
      out[i] = Number.isNaN(s) ? 0 : s; // Infinity counts give NaN: worst, not best
    }
    return tierByFreeSlot(endpoints, out);
  },
};
