/**
 * `llmgw bench calibrate --noise`: the spread of the sim's step times
 * against the real runs that publish their token gaps. Each stage is
 * replayed with no noise (the step model's own variety) and with the
 * shipped spread, beside the published gaps; then the error of each spread
 * on a grid, and the best.
 */
import { STEP_NOISE_CV } from "../sim/noise.ts";
import { fitStepNoise, type NoiseStageComparison } from "../sim/noise-calibration.ts";
import { GROUND_TRUTH_SOURCE } from "../sim/profiles/ground-truth-runs.ts";
import { formatTable } from "./report.ts";

/** The spreads the grid tries: 0 to 8 % in steps of 1 %, and the shipped one. */
const GRID = [...new Set([0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, STEP_NOISE_CV])].sort((a, b) => a - b);

interface NoiseCalibration {
  grid: { cv: number; error: number }[];
  best: number;
  shipped: number;
  /** Each stage with no noise, and with the shipped spread. */
  none: NoiseStageComparison[];
  stages: NoiseStageComparison[];
}

export function calibrateNoise(progress: (line: string) => void): NoiseCalibration {
  const results = GRID.map((cv, i) => {
    progress(`replaying the noise stages at a spread of ${cv} (${i + 1}/${GRID.length})`);
    return fitStepNoise([cv])[0]!;
  });
  const best = results.reduce((a, b) => (b.error < a.error ? b : a));
  return {
    grid: results.map((r) => ({ cv: r.cv, error: r.error })),
    best: best.cv,
    shipped: STEP_NOISE_CV,
    none: results.find((r) => r.cv === 0)!.stages,
    stages: results.find((r) => r.cv === STEP_NOISE_CV)!.stages,
  };
}

const pct = (x: number) => `${(x * 100).toFixed(1)} %`;

export function printNoise(n: NoiseCalibration): void {
  const rows = n.stages.map((s, i) => {
    const none = n.none[i]!;
    return [
      s.run.id,
      s.rate,
      `${s.publishedMedianMs.toFixed(2)} / ${s.simMedianMs.toFixed(2)}`,
      ...[0, 1, 2].map((k) => `${pct(s.published[k]!)} / ${pct(none.sim[k]!)} / ${pct(s.sim[k]!)}`),
    ];
  });
  console.log(
    formatTable({
      title: `Step-time noise: the gaps between tokens over their median, published / sim with no noise / sim with ${n.shipped} (lightest stage of BLIS's real H100 runs)`,
      columns: ["run", "req/s", "gap p50 ms (real / sim)", "p80", "p90", "p98"],
      rows,
    }),
  );
  console.log(`  source: ${GROUND_TRUTH_SOURCE}`);
  console.log(`  rms error of the spreads (points): ${n.grid.map((g) => `${g.cv} → ${(g.error * 100).toFixed(2)}`).join(" · ")}`);
  console.log(`  best on the grid ${n.best}; shipped ${n.shipped}\n`);
}

export function noiseJson(n: NoiseCalibration): Record<string, unknown> {
  return {
    source: GROUND_TRUTH_SOURCE,
    shipped: n.shipped,
    best: n.best,
    grid: n.grid,
    stages: n.stages.map((s, i) => ({
      id: s.run.id,
      rate: s.rate,
      gap_p50_ms: { published: s.publishedMedianMs, sim: s.simMedianMs },
      spread_p80_p90_p98: { published: s.published, no_noise: n.none[i]!.sim, sim: s.sim },
    })),
  };
}
