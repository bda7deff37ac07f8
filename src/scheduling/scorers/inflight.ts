/**
 * Scorer `inflight`: fewer requests the router itself has in flight to the
 * endpoint is better.
 *
 * Consumes `inflight` (the router's own dispatched + leased count, never
 * stale). score = 1 - inflight / max(inflight over candidates); all equal
 * (including all 0) → 1. This is the one load signal that reacts within a
 * request, before the engine's next /metrics poll shows the new work.
 */
import type { EndpointView, RequestView, Scorer, SchedulingContext } from "../types.ts";

export const inflight: Scorer = {
  name: "inflight",
  score: function inflightScore(_req: RequestView, endpoints: readonly EndpointView[], _ctx: SchedulingContext): number[] {
    let max = 0;
    for (const e of endpoints) if (e.inflight > max) max = e.inflight;
    const out = new Array<number>(endpoints.length);
    for (let i = 0; i < endpoints.length; i++) {
      const n = endpoints[i]!.inflight;
      // `!(n > 0)` sends 0 and a corrupt NaN count to 1; Infinity / Infinity
      // is NaN, which becomes 0 (the profile clamps too, but scorers are
      // NaN-free on their own).
      const s = !(n > 0) ? 1 : 1 - n / max;
      out[i] = s === s ? s : 0;
    }
    return out;
  },
};
