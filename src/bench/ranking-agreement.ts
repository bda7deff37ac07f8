/**
 * Whether two runs rank policies alike, counting only what the reference
 * run can tell apart: every pair of policies whose figures there differ by
 * more than `tolerance` (relative to the larger) must come in the same order
 * in the other run; a closer pair is a tie, which run-to-run noise orders
 * either way.
 */
export function rankingAgrees(
  reference: ReadonlyMap<string, number>,
  other: ReadonlyMap<string, number>,
  tolerance: number,
  better: "higher" | "lower",
): boolean {
  const names = [...reference.keys()].filter((n) => other.has(n));
  const sign = better === "higher" ? 1 : -1;
  for (let i = 0; i < names.length; i++)
    for (let j = i + 1; j < names.length; j++) {
      const a = reference.get(names[i]!)!;
      const b = reference.get(names[j]!)!;
      if (Math.abs(a - b) <= tolerance * Math.max(Math.abs(a), Math.abs(b))) continue;
      const x = other.get(names[i]!)!;
      const y = other.get(names[j]!)!;
      if (Math.sign((a - b) * sign) !== Math.sign((x - y) * sign)) return false;
    }
  return true;
}
