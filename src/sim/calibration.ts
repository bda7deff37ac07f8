/**
 * The sim-engine against published vLLM sweeps (pure): replay each sweep's
 * closed loop on the engine core with its profile, and compare per point
 * TTFT p50, ITL/TPOT p50, output tokens per second and end-to-end latency
 * where the source gives them.
 */
import { seededUnit } from "../shared/seeded.ts";
import { type ClosedLoopResult, mean, percentile, runClosedLoop } from "./closed-loop.ts";
import { REPLAY_NOISE } from "./noise.ts";
import { resolveProfile } from "./profiles/catalog.ts";
import type { EfficiencyConstants } from "./profiles/efficiency.ts";
import type { PublishedSweep } from "./profiles/published-sweeps.ts";

export type CalibrationMetric = "ttft_p50_ms" | "itl_p50_ms" | "tpot_p50_ms" | "out_tok_s" | "e2e_mean_ms" | "out_tok_s_vs_first";

interface CalibrationRow {
  concurrency: number;
  metric: CalibrationMetric;
  published: number;
  sim: number;
  /** (sim − published) / published. */
  relErr: number;
  /** Set when the published point measures its client, not the engine: left out of the medians and maxima. */
  harnessBound?: string;
}

export interface SweepCalibration {
  sweep: PublishedSweep;
  profile: string;
  rows: CalibrationRow[];
  medianAbsErr: number;
  maxAbsErr: number;
  preemptions: number;
  /** Each point's run length on the core's virtual clock (ms), in the sweep's order. */
  pointMs: number[];
}

/** What a `vllm bench serve`-style client reports of one point's closed loop; `firstTokS`: the sweep's first point's tokens/s (NaN for the first point itself). */
export function pointFigures(r: ClosedLoopResult, firstTokS: number): Record<CalibrationMetric, number> {
  const tokS = (r.outputTokens / r.durationMs) * 1000;
  return {
    ttft_p50_ms: percentile(r.ttftMs, 0.5),
    itl_p50_ms: percentile(r.itlMs, 0.5),
    tpot_p50_ms: percentile(r.tpotMs, 0.5),
    out_tok_s: tokS,
    e2e_mean_ms: mean(r.e2eMs),
    out_tok_s_vs_first: tokS / (Number.isNaN(firstTokS) ? tokS : firstTokS),
  };
}

/** The metrics a published point gives, with their published values. */
function publishedFigures(point: PublishedSweep["points"][number]): [CalibrationMetric, number][] {
  const all: [CalibrationMetric, number | undefined][] = [
    ["ttft_p50_ms", point.ttftP50Ms],
    ["itl_p50_ms", point.itlP50Ms],
    ["tpot_p50_ms", point.tpotP50Ms],
    ["out_tok_s", point.outTokS],
    ["e2e_mean_ms", point.e2eMeanMs],
    ["out_tok_s_vs_first", point.outTokSRelative],
  ];
  return all.filter((m): m is [CalibrationMetric, number] => m[1] !== undefined);
}

export function calibrateSweep(sweep: PublishedSweep, efficiency?: EfficiencyConstants): SweepCalibration {
  const { name, profile: p } = resolveProfile(sweep.profile, efficiency);
  const config = {
    maxNumSeqs: p.maxNumSeqs,
    maxNumBatchedTokens: p.maxNumBatchedTokens,
    numGpuBlocks: p.numGpuBlocks,
    blockSize: p.blockSize,
    maxModelLen: p.maxModelLen,
    asyncScheduling: sweep.asyncScheduling,
  };
  const timing = {
    timing: { derived: p.cost, derivedScale: 1, flatDecode: undefined, flatPrefill: undefined },
    jitter: REPLAY_NOISE.stepCv,
    frontendJitterMs: REPLAY_NOISE.frontendJitterMs,
    frontend: p.frontend,
    firstTokenDelayMs: 0,
  };
  const rows: CalibrationRow[] = [];
  let firstTokS = NaN;
  let preemptions = 0;
  const pointMs: number[] = [];
  for (const point of sweep.points) {
    const c = point.concurrency;
    const r = runClosedLoop(
      config,
      timing,
      {
        concurrency: c,
        requests: sweep.requests(c),
        inputTokens: sweep.inputTokens,
        outputTokens: sweep.outputTokens,
        outputSpread: sweep.outputSpread,
      },
      seededUnit(REPLAY_NOISE.seed),
    );
    preemptions += r.preemptions;
    pointMs.push(r.durationMs);
    const sim = pointFigures(r, firstTokS);
    if (Number.isNaN(firstTokS)) firstTokS = sim.out_tok_s;
    for (const [metric, value] of publishedFigures(point)) {
      rows.push({
        concurrency: c,
        metric,
        published: value,
        sim: sim[metric],
        relErr: (sim[metric] - value) / value,
        ...(point.harnessBound ? { harnessBound: point.harnessBound } : {}),
      });
    }
  }
  const abs = rows.filter((r) => !r.harnessBound).map((r) => Math.abs(r.relErr));
  return { sweep, profile: name, rows, medianAbsErr: percentile(abs, 0.5), maxAbsErr: Math.max(...abs), preemptions, pointMs };
}
