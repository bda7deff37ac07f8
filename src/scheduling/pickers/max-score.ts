/**
 * Picker `max-score`: the endpoint with the highest total score; endpoints
 * within TIE_EPSILON of the best are equals and one of them is chosen at
 * random, so identical replicas share load instead of the first in the
 * table taking everything. NaN totals never win.
 */
import type { EndpointView, Picker } from "../types.ts";

/** Totals closer than this to the best count as ties (weights are ≤ 100, so float noise is far below it). */
const TIE_EPSILON = 1e-9;

export const maxScore: Picker = {
  name: "max-score",
  pick: function maxScorePick(endpoints: readonly EndpointView[], totals: readonly number[], random: () => number): EndpointView | undefined {
    const n = endpoints.length;
    if (n === 0) return undefined;
    let best = -Infinity;
    for (let i = 0; i < n; i++) {
      const t = totals[i] ?? -Infinity;
      if (t > best) best = t;
    }
    // Two passes (max, then ties) so "within epsilon" is measured from the
    // final best, not from a running maximum.
    let ties = 0;
    for (let i = 0; i < n; i++) if ((totals[i] ?? -Infinity) >= best - TIE_EPSILON) ties++;
    if (ties === 0) return endpoints[Math.min(n - 1, Math.floor(random() * n))]; // every total NaN
    let k = ties === 1 ? 0 : Math.min(ties - 1, Math.floor(random() * ties));
    for (let i = 0; i < n; i++) {
      if ((totals[i] ?? -Infinity) >= best - TIE_EPSILON) {
        if (k === 0) return endpoints[i];
        k--;
      }
    }
    return undefined;
  },
};
