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
 */
import type { EndpointView, RequestView, Scorer, SchedulingContext } from "../types.ts";

export const inflight: Scorer = {
  name: "inflight",
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
      out[i] = s === s ? s : 0; // Infinity counts give NaN: worst, not best
    }
    return out;
  },
};
