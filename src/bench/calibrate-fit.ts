/**
 * Refits the step model's efficiency constants (`llmgw bench calibrate
 * --fit`): a coordinate search over the published sweeps marked `fitted`,
 * the real runs of the fit set (`GROUND_TRUTH_FIT_WORKLOADS`), replayed at a
 * fifth of their length, and the counted `vllm bench serve` runs where given
 * (`--without-gpu`). Each table — each fitted sweep, and each of the
 * runs' four columns — is held to its target (`bench calibrate`'s): the
 * search minimises the worst table's median error over its target plus the
 * tables' mean. It prints constants to store in
 * src/sim/profiles/efficiency.ts; it changes nothing by itself.
 */

import { replayBenchServeRun } from "../sim/bench-serve-replay.ts";
import { calibrateSweep } from "../sim/calibration.ts";
import { GROUND_TRUTH_METRICS, replayGroundTruthRun } from "../sim/ground-truth.ts";
import type { BenchServeRun } from "../sim/profiles/bench-serve-runs.ts";
import type { EfficiencyConstants } from "../sim/profiles/efficiency.ts";
import type { GroundTruthRun } from "../sim/profiles/ground-truth-runs.ts";
import type { PublishedSweep } from "../sim/profiles/published-sweeps.ts";
import { RUN_TARGETS, TARGETS } from "./calibrate-targets.ts";
import { median } from "./report.ts";

type Tuned = "bandwidthEfficiency" | "computeEfficiency" | "stepOverheadMs" | "perSeqOverheadMs" | "frontendLatencyMs" | "frontendServiceMs" | "allReduceHopMs";

/** First step of each constant; the steps shrink each round. */
const STEPS: Record<Tuned, number> = {
  bandwidthEfficiency: 0.05,
  computeEfficiency: 0.05,
  stepOverheadMs: 0.3,
  perSeqOverheadMs: 0.01,
  frontendLatencyMs: 2,
  frontendServiceMs: 1,
  allReduceHopMs: 0.002,
};
const ROUNDS = 6;
const SHRINK = 0.6;
/** The runs' stages are replayed at this fraction of their length while fitting (steady state comes within seconds). */
const FIT_DURATION_SCALE = 0.2;

/** Each table's median absolute error over its target: each fitted sweep, and each of the runs' four columns. */
function targetRatios(
  sweeps: readonly PublishedSweep[],
  runs: readonly GroundTruthRun[],
  e: EfficiencyConstants,
  serveRuns: readonly BenchServeRun[],
): number[] {
  const ratios = sweeps.map((s) => calibrateSweep(s, e).medianAbsErr / TARGETS.fittedMedian);
  const stages = runs.filter((r) => !r.overload).flatMap((r) => replayGroundTruthRun(r, e, FIT_DURATION_SCALE).stages);
  if (stages.length > 0) for (const m of GROUND_TRUTH_METRICS) ratios.push(median(stages.map((s) => Math.abs(s.relErr[m]))) / RUN_TARGETS[m]);
  // The bench-serve runs are a table of their own: their bursts are prefill-bound where BLIS's runs are decode-bound.
  const served = serveRuns.map((r) => replayBenchServeRun(r, e));
  if (served.length > 0) for (const m of GROUND_TRUTH_METRICS) ratios.push(median(served.map((c) => Math.abs(c.relErr[m]))) / RUN_TARGETS[m]);
  return ratios;
}

/** The worst table against its target, plus the tables' mean: every table pulled under its target, none left far over. */
function fitScore(sweeps: readonly PublishedSweep[], runs: readonly GroundTruthRun[], e: EfficiencyConstants, serveRuns: readonly BenchServeRun[]): number {
  const r = targetRatios(sweeps, runs, e, serveRuns);
  return Math.max(...r) + r.reduce((a, b) => a + b, 0) / r.length;
}

export function fitEfficiency(
  sweeps: readonly PublishedSweep[],
  runs: readonly GroundTruthRun[],
  start: EfficiencyConstants,
  log: (line: string) => void,
  serveRuns: readonly BenchServeRun[] = [],
): EfficiencyConstants {
  let best = { ...start };
  let bestScore = fitScore(sweeps, runs, best, serveRuns);
  log(`start: score ${bestScore.toFixed(4)}`);
  const steps = { ...STEPS };
  for (let round = 0; round < ROUNDS; round++) {
    for (const k of Object.keys(steps) as Tuned[]) {
      for (const dir of [-1, 1]) {
        const cand: EfficiencyConstants = { ...best, [k]: Math.max(0, best[k] + dir * steps[k]) };
        const score = fitScore(sweeps, runs, cand, serveRuns);
        if (score < bestScore) {
          best = cand;
          bestScore = score;
        }
      }
      steps[k] *= SHRINK;
    }
    log(`round ${round + 1}: score ${bestScore.toFixed(4)} ${JSON.stringify(best)}`);
  }
  return best;
}
