/**
 * `llmgw bench calibrate`: the sim-engine against published vLLM sweeps.
 * Each sweep's closed loop (its lengths, concurrency, ignore_eos) is replayed
 * on the engine core with the sweep's profile, on a virtual clock, and each
 * published figure is printed beside the sim's with the relative error.
 */

import { boolFlag, type ParsedArgs, stringFlag, UsageError } from "../shared/flags.ts";
import { type CalibrationMetric, calibrateSweep, type SweepCalibration } from "../sim/calibration.ts";
import { FITTED } from "../sim/profiles/efficiency.ts";
import { PUBLISHED_SWEEPS } from "../sim/profiles/published-sweeps.ts";
import { fitEfficiency } from "./calibrate-fit.ts";
import { formatTable } from "./report.ts";
import type { BenchScenario } from "./scenario.ts";

/** The targets the sim is held to (issue: median ≤ 15 % per fitted table, no point over 35 %, an unfitted pair within 25 % median). */
export const TARGETS = { fittedMedian: 0.15, point: 0.35, unfittedMedian: 0.25 } as const;

const USAGE = `usage: llmgw bench calibrate [--sweep ID] [--fit] [--json]

Replays each published vLLM sweep (src/sim/profiles/published-sweeps.ts)
against the sim-engine's core on a virtual clock and prints, per point,
published vs sim for TTFT p50, ITL/TPOT p50, output tokens/s (and mean
end-to-end latency where published) with the relative error, then each
table's median and largest absolute error against the targets (fitted
tables: median ≤ 15 %, no point over 35 %; unfitted: median ≤ 25 %).
Points marked "client" measure the benchmark's client, not the engine,
and are left out of the targets.

  --sweep ID   one sweep (${PUBLISHED_SWEEPS.map((s) => s.id).join(", ")})
  --fit        refit the efficiency constants to the fitted sweeps and print them
  --json       one JSON object`;

const METRIC_NAMES: Record<CalibrationMetric, string> = {
  ttft_p50_ms: "TTFT p50 ms",
  itl_p50_ms: "ITL p50 ms",
  tpot_p50_ms: "TPOT p50 ms",
  out_tok_s: "out tok/s",
  e2e_mean_ms: "E2E mean ms",
  out_tok_s_vs_first: "tok/s vs c=1",
};

function pct(x: number): string {
  return `${x >= 0 ? "+" : ""}${(x * 100).toFixed(1)} %`;
}

/** Whether a table meets its targets. */
export function meetsTargets(c: SweepCalibration): boolean {
  if (c.sweep.fitted) return c.medianAbsErr <= TARGETS.fittedMedian && c.maxAbsErr <= TARGETS.point;
  return c.medianAbsErr <= TARGETS.unfittedMedian;
}

function printSweep(c: SweepCalibration): void {
  const s = c.sweep;
  const rows = c.rows.map((r) => [r.concurrency, METRIC_NAMES[r.metric], r.published, r.sim, pct(r.relErr), r.harnessBound ? "client" : ""]);
  console.log(
    formatTable({
      title: `${s.title} — ${s.fitted ? "fitted" : "predicted (no constant fitted to it)"}; profile ${c.profile}; ${s.inputTokens} in / ${s.outputTokens} out`,
      columns: ["c", "metric", "published", "sim", "error", ""],
      rows,
    }),
  );
  console.log(`  source: ${s.source}`);
  if (s.lengthsNote) console.log(`  lengths: ${s.lengthsNote}`);
  console.log(
    `  median |error| ${(c.medianAbsErr * 100).toFixed(1)} %, largest ${(c.maxAbsErr * 100).toFixed(1)} % — ${meetsTargets(c) ? "meets" : "misses"} its targets\n`,
  );
}

export const calibrateScenario: BenchScenario = {
  name: "calibrate",
  summary: "the sim-engine against published vLLM sweeps: per point, published vs sim and the error",
  usage: USAGE,
  options: { sweep: { type: "string" }, fit: { type: "boolean" } },
  async run(args: ParsedArgs) {
    const id = stringFlag(args, "sweep");
    const sweeps = id === undefined ? PUBLISHED_SWEEPS : PUBLISHED_SWEEPS.filter((s) => s.id === id);
    if (sweeps.length === 0) throw new UsageError(`--sweep: unknown sweep '${id}' (expected one of ${PUBLISHED_SWEEPS.map((s) => s.id).join(", ")})`);
    if (boolFlag(args, "fit")) {
      const fitted = fitEfficiency(
        sweeps.filter((s) => s.fitted),
        FITTED,
        (line) => console.error(line),
      );
      console.log(JSON.stringify(fitted, null, 2));
      return 0;
    }
    const results = sweeps.map((s) => calibrateSweep(s));
    if (args.values.json === true) {
      console.log(
        JSON.stringify({
          scenario: "calibrate",
          targets: TARGETS,
          constants: FITTED,
          sweeps: results.map((c) => ({
            id: c.sweep.id,
            title: c.sweep.title,
            source: c.sweep.source,
            profile: c.profile,
            fitted: c.sweep.fitted,
            input_tokens: c.sweep.inputTokens,
            output_tokens: c.sweep.outputTokens,
            median_abs_error: c.medianAbsErr,
            max_abs_error: c.maxAbsErr,
            meets_targets: meetsTargets(c),
            points: c.rows.map((r) => ({
              concurrency: r.concurrency,
              metric: r.metric,
              published: r.published,
              sim: r.sim,
              rel_error: r.relErr,
              ...(r.harnessBound ? { client_bound: r.harnessBound } : {}),
            })),
          })),
        }),
      );
    } else {
      for (const c of results) printSweep(c);
    }
    return 0;
  },
};
