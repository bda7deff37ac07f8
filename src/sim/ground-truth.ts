/**
 * The sim-engine against real vLLM runs with their exact workloads (pure):
 * each run of `ground-truth-runs.ts` replayed on the engine core on a virtual
 * clock — its model, tensor-parallel degree and engine flags, inference-perf's
 * shared-prefix prompts, Poisson arrivals stage by stage, the client's
 * timeout — and measured as inference-perf measures it, stage by stage,
 * beside the published figures: BLIS's columns (E2E mean, TTFT mean and p99,
 * ITL mean).
 */
import { seededUnit } from "../shared/seeded.ts";
import { mean, percentile } from "./closed-loop.ts";
import { EngineCore } from "./engine-core.ts";
import { REPLAY_NOISE, type ReplayNoise } from "./noise.ts";
import { type OpenLoopRecord, type OpenLoopRequest, runOpenLoop } from "./open-loop.ts";
import type { EfficiencyConstants } from "./profiles/efficiency.ts";
import { findGpu } from "./profiles/gpu-facts.ts";
import { CLIENT_TIMEOUT_S, GROUND_TRUTH_ENGINE, type GroundTruthRun, type GroundTruthStage, STAGE_GAP_S } from "./profiles/ground-truth-runs.ts";
import { findArch } from "./profiles/model-facts.ts";
import { type DerivedProfile, deriveProfile } from "./profiles/profile.ts";
import { idsPrompt, type PromptTokens } from "./tokens.ts";

export type GroundTruthMetric = "e2e_mean_ms" | "ttft_mean_ms" | "ttft_p99_ms" | "itl_mean_ms";

export const GROUND_TRUTH_METRICS: readonly GroundTruthMetric[] = ["e2e_mean_ms", "ttft_mean_ms", "ttft_p99_ms", "itl_mean_ms"];

interface StageFigures {
  ok: number;
  failed: number;
  e2e_mean_ms: number;
  ttft_mean_ms: number;
  ttft_p99_ms: number;
  itl_mean_ms: number;
}

interface StageComparison {
  stage: number;
  rate: number;
  published: GroundTruthStage;
  sim: StageFigures;
  /** (sim − published) / published per metric. */
  relErr: Record<GroundTruthMetric, number>;
}

export interface RunComparison {
  run: GroundTruthRun;
  /** KV blocks the profile derives for the run's engine (the published figure is run.kvBlocks). */
  kvBlocks: number;
  stages: StageComparison[];
  preemptions: number;
}

/** The model's vocabulary bound for random prompt ids (every run's model has 32,000 tokens). */
const VOCAB = 32_000;
const BOS = 1;

/** A fixed-seed LCG in [0, 1): the same workload on every run and machine. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s / 0x100000000;
  };
}

/** The run's engine: its GPU, model, tensor-parallel degree and flags, KV blocks derived as vLLM sizes them. */
export function groundTruthProfile(run: GroundTruthRun, efficiency?: EfficiencyConstants): DerivedProfile {
  const gpu = findGpu(GROUND_TRUTH_ENGINE.gpu);
  const arch = findArch(run.arch);
  if (!gpu || !arch) throw new Error(`ground-truth run ${run.id}: unknown GPU or model`);
  return deriveProfile({
    gpu,
    arch,
    tp: run.tp,
    dtype: "bf16",
    maxModelLen: GROUND_TRUTH_ENGINE.maxModelLen,
    maxNumSeqs: GROUND_TRUTH_ENGINE.maxNumSeqs,
    maxNumBatchedTokens: GROUND_TRUTH_ENGINE.maxNumBatchedTokens,
    efficiency,
  });
}

/**
 * inference-perf's shared-prefix prompts, shuffled once: 10 groups × 10,
 * BOS + a system prompt shared within its group + a question of its own.
 * Random ids re-tokenize a little longer than drawn, so both parts are
 * scaled to the run's measured mean prompt length.
 */
export function sharedPrefixPrompts(run: GroundTruthRun, promptTokensMean: number, seed: number): PromptTokens[] {
  const rand = lcg(seed);
  const id = () => 3 + Math.floor(rand() * (VOCAB - 3));
  const scale = (promptTokensMean - 1) / (run.shape.systemTokens + run.shape.questionTokens);
  const system = Math.round(run.shape.systemTokens * scale);
  const question = Math.max(1, Math.round(promptTokensMean) - 1 - system);
  const prompts: PromptTokens[] = [];
  for (let g = 0; g < 10; g++) {
    const prefix = [BOS, ...Array.from({ length: system }, id)];
    for (let q = 0; q < 10; q++) prompts.push(idsPrompt([...prefix, ...Array.from({ length: question }, id)], GROUND_TRUTH_ENGINE.blockSize, g * 10 + q));
  }
  for (let i = prompts.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [prompts[i], prompts[j]] = [prompts[j]!, prompts[i]!];
  }
  return prompts;
}

/** A stage's arrivals (ms from its start): rate × duration exponential gaps rescaled to sum to the duration, as inference-perf's constant load draws them. */
export function stageArrivals(rate: number, durationS: number, rand: () => number): number[] {
  const n = Math.round(rate * durationS);
  const gaps = Array.from({ length: n }, () => -Math.log(1 - rand()));
  const scale = (durationS * 1000) / gaps.reduce((a, b) => a + b, 0);
  let t = 0;
  return gaps.map((g) => {
    t += g * scale;
    return t;
  });
}

/** A stage's figures as inference-perf computes them: over the requests that finished; ITL over every streamed line, two per token and two for [DONE]. */
export function clientFigures(records: readonly OpenLoopRecord[]): StageFigures {
  const done = records.filter((r) => r.ok);
  let span = 0;
  let gaps = 0;
  for (const r of done) {
    span += r.lastAt - r.firstAt;
    gaps += 2 * r.tokens + 1;
  }
  const ttft = done.map((r) => r.firstAt - r.sentAt);
  return {
    ok: done.length,
    failed: records.length - done.length,
    e2e_mean_ms: mean(done.map((r) => r.endAt - r.sentAt)),
    ttft_mean_ms: mean(ttft),
    ttft_p99_ms: percentile(ttft, 0.99),
    itl_mean_ms: gaps > 0 ? span / gaps : NaN,
  };
}

const PUBLISHED_KEY: Record<GroundTruthMetric, "e2eMeanMs" | "ttftMeanMs" | "ttftP99Ms" | "itlMeanMs"> = {
  e2e_mean_ms: "e2eMeanMs",
  ttft_mean_ms: "ttftMeanMs",
  ttft_p99_ms: "ttftP99Ms",
  itl_mean_ms: "itlMeanMs",
};

/** A stage's published figure for one of BLIS's columns. */
export function publishedFigure(stage: GroundTruthStage, m: GroundTruthMetric): number {
  return stage[PUBLISHED_KEY[m]];
}

/** An engine core for a replayed real run: the derived profile's scheduler, KV cache, step costs and API server, with `noise`. */
export function replayCore(p: DerivedProfile, asyncScheduling: boolean, noise: ReplayNoise = REPLAY_NOISE): EngineCore {
  return new EngineCore(
    {
      maxNumSeqs: p.maxNumSeqs,
      maxNumBatchedTokens: p.maxNumBatchedTokens,
      numGpuBlocks: p.numGpuBlocks,
      blockSize: p.blockSize,
      maxModelLen: p.maxModelLen,
      asyncScheduling,
    },
    {
      timing: { derived: p.cost, derivedScale: 1, flatDecode: undefined, flatPrefill: undefined },
      jitter: noise.stepCv,
      frontendJitterMs: noise.frontendJitterMs,
      frontend: p.frontend,
      firstTokenDelayMs: 0,
    },
    seededUnit(noise.seed),
  );
}

/**
 * Replays one run, stage after stage on one engine (its cache carried over),
 * and compares each stage. `durationScale` < 1 shortens every stage (the
 * fit's quicker replays: the same rates, fewer requests).
 */
export function replayGroundTruthRun(run: GroundTruthRun, efficiency?: EfficiencyConstants, durationScale = 1, noise?: ReplayNoise): RunComparison {
  const p = groundTruthProfile(run, efficiency);
  const core = replayCore(p, GROUND_TRUTH_ENGINE.asyncScheduling, noise);
  const rand = lcg(0x5eed);
  const stages: StageComparison[] = [];
  let at = 0;
  for (const [i, stage] of run.stages.entries()) {
    const prompts = sharedPrefixPrompts(run, stage.promptTokensMean, 0x9e3779b9);
    const requests: OpenLoopRequest[] = stageArrivals(stage.rate, stage.durationS * durationScale, rand).map((t, n) => ({
      at: t,
      prompt: prompts[n % prompts.length]!,
      outputTokens: run.shape.outputTokens,
    }));
    const { records, endAt } = runOpenLoop(core, at, requests, CLIENT_TIMEOUT_S * 1000);
    at = endAt + STAGE_GAP_S * 1000;
    const sim = clientFigures(records);
    const relErr = {} as Record<GroundTruthMetric, number>;
    for (const m of GROUND_TRUTH_METRICS) {
      const published = publishedFigure(stage, m);
      relErr[m] = (sim[m] - published) / published;
    }
    stages.push({ stage: i, rate: stage.rate, published: stage, sim, relErr });
  }
  return { run, kvBlocks: p.numGpuBlocks, stages, preemptions: core.stats.preemptions };
}

/** Median |error| per metric over the stages of the runs BLIS counts (overloaded runs left out). */
export function groundTruthMedians(runs: readonly RunComparison[]): Record<GroundTruthMetric, number> {
  const stages = runs.filter((r) => !r.run.overload).flatMap((r) => r.stages);
  const out = {} as Record<GroundTruthMetric, number>;
  for (const m of GROUND_TRUTH_METRICS)
    out[m] = percentile(
      stages.map((s) => Math.abs(s.relErr[m])),
      0.5,
    );
  return out;
}
