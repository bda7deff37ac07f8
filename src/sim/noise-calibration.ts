/**
 * The step-time noise against real runs (pure): the lightest stage of each
 * of BLIS's runs that publishes its token gaps, replayed on the core with a
 * given spread of step times, and the spread of the gaps between tokens —
 * their 80th, 90th and 98th percentiles over their median — beside the
 * published one. The step model alone spreads the gaps a little (the batch
 * grows and shrinks, a prompt's prefill joins a step); what the real runs
 * spread beyond that is the GPU's and the host's own variation.
 */
import { seededUnit } from "../shared/seeded.ts";
import { percentile } from "./closed-loop.ts";
import { groundTruthProfile, replayCore, sharedPrefixPrompts, stageArrivals } from "./ground-truth.ts";
import { REPLAY_NOISE, type ReplayNoise } from "./noise.ts";
import { runOpenLoop } from "./open-loop.ts";
import type { EfficiencyConstants } from "./profiles/efficiency.ts";
import { CLIENT_TIMEOUT_S, GROUND_TRUTH_ENGINE, GROUND_TRUTH_RUNS, type GroundTruthRun } from "./profiles/ground-truth-runs.ts";

/** p80, p90 and p98 of the gaps over their p50, minus one. */
type GapSpread = readonly [number, number, number];

export interface NoiseStageComparison {
  run: GroundTruthRun;
  rate: number;
  publishedMedianMs: number;
  simMedianMs: number;
  published: GapSpread;
  sim: GapSpread;
}

/** The spread of gaps at p50, p80, p90 and p98. */
export function gapSpread(quantiles: readonly [number, number, number, number]): GapSpread {
  const [p50, p80, p90, p98] = quantiles;
  return [p80 / p50 - 1, p90 / p50 - 1, p98 / p50 - 1];
}

/** The stages that publish their token gaps, each with its run. */
export function noiseStages(): { run: GroundTruthRun; stage: number }[] {
  return GROUND_TRUTH_RUNS.flatMap((run) => run.stages.flatMap((s, stage) => (s.tokenGapsMs ? [{ run, stage }] : [])));
}

/** One stage replayed alone on a fresh engine with `noise`, its gaps' spread beside the published one. */
export function replayNoiseStage(
  run: GroundTruthRun,
  stage: number,
  noise: ReplayNoise = REPLAY_NOISE,
  efficiency?: EfficiencyConstants,
): NoiseStageComparison {
  const s = run.stages[stage]!;
  const published = s.tokenGapsMs;
  if (!published) throw new Error(`${run.id} stage ${stage}: no published token gaps`);
  const core = replayCore(groundTruthProfile(run, efficiency), GROUND_TRUTH_ENGINE.asyncScheduling, noise);
  const prompts = sharedPrefixPrompts(run, s.promptTokensMean, 0x9e3779b9);
  const requests = stageArrivals(s.rate, s.durationS, seededUnit(0x5eed)).map((at, n) => ({
    at,
    prompt: prompts[n % prompts.length]!,
    outputTokens: run.shape.outputTokens,
  }));
  const gaps: number[] = [];
  runOpenLoop(core, 0, requests, CLIENT_TIMEOUT_S * 1000, (ms) => gaps.push(ms));
  const sim = [0.5, 0.8, 0.9, 0.98].map((q) => percentile(gaps, q)) as [number, number, number, number];
  return { run, rate: s.rate, publishedMedianMs: published[0], simMedianMs: sim[0], published: gapSpread(published), sim: gapSpread(sim) };
}

/** How far a replay's spreads are from the published ones: the root mean square of their differences (fractions of the median). */
export function spreadError(stages: readonly NoiseStageComparison[]): number {
  let sum = 0;
  let n = 0;
  for (const s of stages)
    for (let i = 0; i < 3; i++) {
      sum += (s.sim[i]! - s.published[i]!) ** 2;
      n++;
    }
  return Math.sqrt(sum / n);
}

/** Every stage at each spread of step times in `cvs` (the seed and the API server's jitter as in `base`), and each spread's error. */
export function fitStepNoise(cvs: readonly number[], base: ReplayNoise = REPLAY_NOISE): { cv: number; error: number; stages: NoiseStageComparison[] }[] {
  return cvs.map((cv) => {
    const stages = noiseStages().map(({ run, stage }) => replayNoiseStage(run, stage, { ...base, stepCv: cv }));
    return { cv, error: spreadError(stages), stages };
  });
}
