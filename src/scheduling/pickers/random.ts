/** Picker `random`: a uniformly random candidate, ignoring scores (a baseline for benchmarks). */
import type { EndpointView, Picker } from "../types.ts";

export const randomPicker: Picker = {
  name: "random",
  pick: function randomPick(endpoints: readonly EndpointView[], _totals: readonly number[], random: () => number): EndpointView | undefined {
    const n = endpoints.length;
    if (n === 0) return undefined;
    // min() guards a random() that returns exactly 1 (or a bad source).
    const i = Math.min(n - 1, Math.max(0, Math.floor(random() * n)));
    return endpoints[Number.isNaN(i) ? 0 : i];
  },
};
