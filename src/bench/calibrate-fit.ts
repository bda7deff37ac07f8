/**
 * Refits the step model's efficiency constants to the published sweeps
 * marked `fitted` (`llmgw bench calibrate --fit`): a coordinate search that
 * first minimises the worst table's median absolute error, then points over
 * 30 %, then the mean error. It prints constants to store in
 * src/sim/profiles/efficiency.ts; it changes nothing by itself.
 */
import { calibrateSweep } from "../sim/calibration.ts";
import type { EfficiencyConstants } from "../sim/profiles/efficiency.ts";
import type { PublishedSweep } from "../sim/profiles/published-sweeps.ts";

type Tuned = "bandwidthEfficiency" | "computeEfficiency" | "stepOverheadMs" | "perSeqOverheadMs" | "frontendLatencyMs" | "frontendServiceMs";

/** First step of each constant; the steps shrink each round. */
const STEPS: Record<Tuned, number> = {
  bandwidthEfficiency: 0.05,
  computeEfficiency: 0.05,
  stepOverheadMs: 0.3,
  perSeqOverheadMs: 0.01,
  frontendLatencyMs: 2,
  frontendServiceMs: 1,
};
const ROUNDS = 6;
const SHRINK = 0.6;

function fitScore(sweeps: readonly PublishedSweep[], e: EfficiencyConstants): number {
  let worstMedian = 0;
  let over = 0;
  let sum = 0;
  let n = 0;
  for (const s of sweeps) {
    const c = calibrateSweep(s, e);
    worstMedian = Math.max(worstMedian, c.medianAbsErr);
    for (const r of c.rows) {
      if (r.harnessBound) continue;
      const a = Math.abs(r.relErr);
      over = Math.max(over, a - 0.3);
      sum += a;
      n++;
    }
  }
  return worstMedian + 2 * Math.max(0, over) + (0.3 * sum) / Math.max(1, n);
}

export function fitEfficiency(sweeps: readonly PublishedSweep[], start: EfficiencyConstants, log: (line: string) => void): EfficiencyConstants {
  let best = { ...start };
  let bestScore = fitScore(sweeps, best);
  const steps = { ...STEPS };
  for (let round = 0; round < ROUNDS; round++) {
    for (const k of Object.keys(steps) as Tuned[]) {
      for (const dir of [-1, 1]) {
        const cand: EfficiencyConstants = { ...best, [k]: Math.max(0, best[k] + dir * steps[k]) };
        const score = fitScore(sweeps, cand);
        if (score < bestScore) {
          best = cand;
          bestScore = score;
        }
      }
      steps[k] *= SHRINK;
    }
    log(`round ${round + 1}: score ${bestScore.toFixed(4)}`);
  }
  return best;
}
