/**
 * Picker `round-robin`: the candidates in turn, ignoring scores (a
 * benchmark baseline). The turn is the profile's count of decisions before
 * this one, so the picker itself keeps no state: candidate `turn mod n`.
 */
import type { EndpointView, Picker } from "../types.ts";

export const roundRobinPicker: Picker = {
  name: "round-robin",
  pick: function roundRobinPick(endpoints: readonly EndpointView[], _totals: readonly number[], _random: () => number, turn = 0): EndpointView | undefined {
    const n = endpoints.length;
    if (n === 0) return undefined;
    const t = Number.isSafeInteger(turn) && turn > 0 ? turn : 0;
    return endpoints[t % n];
  },
};
