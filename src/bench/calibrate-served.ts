/**
 * `bench calibrate --served`: each published sweep replayed on the sim users
 * run — a served `llmgw sim-engine` process with the sweep's profile, driven
 * point by point by a closed-loop client of its own process
 * (served-closed-loop.ts), on the wall clock — so that the calibration table
 * says how far the served sim is from its core (the virtual-clock replay in
 * sim/calibration.ts) and from the published figures. The engine's own clock
 * is read around each sweep (engine-clock-report.ts): a served column from a
 * starved host says so.
 */
import { spawnLlmgw } from "../shared/llmgw-child.ts";
import { type CalibrationMetric, pointFigures } from "../sim/calibration.ts";
import { REPLAY_NOISE } from "../sim/noise.ts";
import type { PublishedSweep } from "../sim/profiles/published-sweeps.ts";
import { type EngineClockReport, engineClockReport, sampleEngineClocks } from "./engine-clock-report.ts";
import { runServedClosedLoop } from "./served-closed-loop.ts";

const MODEL = "calibrate";

interface ServedPoint {
  concurrency: number;
  figures: Record<CalibrationMetric, number>;
  requests: number;
  errors: number;
}

export interface ServedSweep {
  id: string;
  points: ServedPoint[];
  engine_clock: EngineClockReport;
  wall_s: number;
}

/** The sim-engine flags that give the sweep's profile. */
function profileFlags(p: PublishedSweep["profile"]): string[] {
  const f: string[] = [];
  if (p.profile !== undefined) f.push("--profile", p.profile);
  if (p.gpu !== undefined) f.push("--gpu", p.gpu);
  if (p.arch !== undefined) f.push("--arch", p.arch);
  if (p.tp !== undefined) f.push("--tp", String(p.tp));
  if (p.dtype !== undefined) f.push("--dtype", p.dtype);
  if (p.gpuMemoryUtilization !== undefined) f.push("--gpu-memory-utilization", String(p.gpuMemoryUtilization));
  if (p.maxModelLen !== undefined) f.push("--max-model-len", String(p.maxModelLen));
  return f;
}

/**
 * One sweep on one served engine, its points in order. `coreMs[i]`: point
 * i's length on the core's virtual clock, which bounds the wall time it may
 * take here (×10, + 60 s).
 */
export async function runServedSweep(sweep: PublishedSweep, coreMs: readonly number[], progress: (line: string) => void): Promise<ServedSweep> {
  const t0 = performance.now();
  const engine = await spawnLlmgw([
    "sim-engine",
    "--port",
    "0",
    "--model",
    MODEL,
    ...profileFlags(sweep.profile),
    ...(sweep.asyncScheduling ? [] : ["--no-async-scheduling"]),
    // The core's seed: the served engine draws the same noise, in the order its steps come.
    "--seed",
    String(REPLAY_NOISE.seed),
  ]);
  try {
    const url = engine.urls.api ?? engine.url;
    const clockBefore = await sampleEngineClocks([url]);
    const points: ServedPoint[] = [];
    let firstTokS = NaN;
    for (const [i, point] of sweep.points.entries()) {
      const c = point.concurrency;
      const requests = sweep.requests(c);
      progress(`calibrate --served: ${sweep.id}: c=${c}, ${requests} requests …`);
      const r = await runServedClosedLoop(
        {
          url,
          model: MODEL,
          concurrency: c,
          requests,
          inputTokens: sweep.inputTokens,
          outputTokens: sweep.outputTokens,
          ...(sweep.outputSpread !== undefined ? { outputSpread: sweep.outputSpread } : {}),
          promptSeed: i + 1,
        },
        (coreMs[i] ?? 60_000) * 10 + 60_000,
      );
      const figures = pointFigures(r, firstTokS);
      if (Number.isNaN(firstTokS)) firstTokS = figures.out_tok_s;
      points.push({ concurrency: c, figures, requests, errors: r.errors });
    }
    const clock = engineClockReport(clockBefore, await sampleEngineClocks([url]));
    return { id: sweep.id, points, engine_clock: clock, wall_s: Math.round((performance.now() - t0) / 100) / 10 };
  } finally {
    await engine.stop();
  }
}
