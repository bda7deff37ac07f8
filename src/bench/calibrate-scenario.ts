/**
 * `llmgw bench calibrate`: the sim-engine against published vLLM sweeps.
 * Each sweep's closed loop (its lengths, concurrency, ignore_eos) is replayed
 * on the engine core with the sweep's profile, on a virtual clock, and each
 * published figure is printed beside the sim's with the relative error.
 */

import { boolFlag, type ParsedArgs, stringFlag, UsageError } from "../shared/flags.ts";
import { type CalibrationMetric, calibrateSweep, type SweepCalibration } from "../sim/calibration.ts";
import { FITTED } from "../sim/profiles/efficiency.ts";
import { GROUND_TRUTH_FIT_WORKLOADS, GROUND_TRUTH_RUNS } from "../sim/profiles/ground-truth-runs.ts";
import { PUBLISHED_SWEEPS } from "../sim/profiles/published-sweeps.ts";
import {
  benchServeGpus,
  benchServeJson,
  printAllRealRuns,
  printBenchServeRuns,
  printLeftOut,
  replayBenchServeRuns,
  withoutGpu,
} from "./calibrate-bench-serve.ts";
import { fitEfficiency } from "./calibrate-fit.ts";
import { calibrateNoise, noiseJson, printNoise } from "./calibrate-noise.ts";
import { findRuns, printRuns, replayRuns, runsJson } from "./calibrate-runs.ts";
import { runServedSweep, type ServedSweep } from "./calibrate-served.ts";
import { RUN_TARGETS, TARGETS } from "./calibrate-targets.ts";
import { engineClockCell, engineClocksLine, strictVerdict } from "./engine-clock-report.ts";
import { progressPrinter } from "./progress-line.ts";
import { formatTable, median, signedPercent } from "./report.ts";
import type { BenchScenario } from "./scenario.ts";

/** The served sim against its core: within this of the core's figure on every point, on an idle host. */
const SERVED_VS_CORE = 0.05;

const USAGE = `usage: llmgw bench calibrate [--sweep ID] [--runs [--run ID]] [--noise] [--fit [--without-gpu GPU]] [--served [--strict]] [--json]

Replays each published vLLM sweep (src/sim/profiles/published-sweeps.ts)
against the sim-engine's core on a virtual clock and prints, per point,
published vs sim for TTFT p50, ITL/TPOT p50, output tokens/s (and mean
end-to-end latency where published) with the relative error, then each
table's median and largest absolute error against the targets (fitted
tables: median ≤ 15 %, no point over 35 %; unfitted: median ≤ 25 %).
Points marked "client" measure the benchmark's client, not the engine,
and are left out of the targets.

  --sweep ID   one sweep (${PUBLISHED_SWEEPS.map((s) => s.id).join(", ")})
  --runs       also replay the real vLLM runs of BLIS's public ground truth
               (H100; Llama-2-7B, Llama-2-70B TP4, CodeLlama-34B TP2,
               Mixtral-8x7B TP2; open-loop shared-prefix load in stages) on
               the core, each stage as the runs' client measured it: E2E
               mean, TTFT mean and p99, ITL mean, and the medians over the
               runs beside BLIS's and the targets (${Object.values(RUN_TARGETS)
                 .map((t) => `${t * 100} %`)
                 .join(" / ")}); then the \`vllm bench serve\` runs of
               GPUStack's performance lab (A100 and H100; Qwen3-14B,
               Qwen3-32B, Qwen3-235B-A22B TP8; every request at once) in the
               same columns, with the medians per GPU; about two minutes
  --run ID     one run (${GROUND_TRUTH_RUNS.map((r) => r.id).join(", ")}); implies --runs
  --noise      also replay the lightest stage of eight of BLIS's runs (the
               ones that publish their token gaps) with no step-time noise,
               with the shipped spread and with each spread of a grid (0 to
               8 %), and print the gaps' p80, p90 and p98 over their median
               beside the published ones, each spread's error and the best
               (about a minute and a half)
  --fit        refit the efficiency constants to the fitted sweeps and the
               runs of the fit set (general and codegen), and print them (minutes)
  --without-gpu GPU
               with --fit: fit without that GPU's data (its sweeps, BLIS's
               runs when it is the H100, its bench-serve runs; the other
               GPUs' bench-serve runs are fitted too), then print its
               bench-serve runs' medians under those constants: leave one
               GPU out (${benchServeGpus().join(", ")})
  --served     also replay each sweep on a served sim-engine process (the sim
               users run), point by point, with a closed-loop client of its own
               process on the wall clock (minutes): each figure beside the core's,
               its error against the published one and against the core's
               (target: within ${SERVED_VS_CORE * 100} % of the core on every point, idle host)
  --strict     with --served: exit 1 when an engine fell behind its own clock
               (bench/engine-clock-report.ts; docs/benchmarks.md)
  --json       one JSON object`;

const METRIC_NAMES: Record<CalibrationMetric, string> = {
  ttft_p50_ms: "TTFT p50 ms",
  itl_p50_ms: "ITL p50 ms",
  tpot_p50_ms: "TPOT p50 ms",
  out_tok_s: "out tok/s",
  e2e_mean_ms: "E2E mean ms",
  out_tok_s_vs_first: "tok/s vs c=1",
};

/** Whether a table meets its targets. */
export function meetsTargets(c: SweepCalibration): boolean {
  if (c.sweep.fitted) return c.medianAbsErr <= TARGETS.fittedMedian && c.maxAbsErr <= TARGETS.point;
  return c.medianAbsErr <= TARGETS.unfittedMedian;
}

/** The served figure of a row, its error against the published figure and against the core's. */
interface ServedRow {
  served: number;
  relErr: number;
  vsCore: number;
}

function servedRows(c: SweepCalibration, served: ServedSweep): ServedRow[] {
  return c.rows.map((r) => {
    const v = served.points.find((p) => p.concurrency === r.concurrency)!.figures[r.metric];
    return { served: v, relErr: (v - r.published) / r.published, vsCore: (v - r.sim) / r.sim };
  });
}

/** Served figures against the published (points that measure the client left out) and against the core (every point). */
function servedSummary(c: SweepCalibration, rows: readonly ServedRow[]) {
  const abs = rows.filter((_, i) => !c.rows[i]!.harnessBound).map((r) => Math.abs(r.relErr));
  const vsCore = rows.map((r) => Math.abs(r.vsCore));
  const maxVsCore = Math.max(...vsCore);
  return {
    median_abs_error: median(abs),
    max_abs_error: Math.max(...abs),
    median_abs_vs_core: median(vsCore),
    max_abs_vs_core: maxVsCore,
    within_target_of_core: maxVsCore <= SERVED_VS_CORE,
  };
}

function printSweep(c: SweepCalibration, served: ServedSweep | undefined): void {
  const s = c.sweep;
  const sr = served ? servedRows(c, served) : undefined;
  const rows = c.rows.map((r, i) => [
    r.concurrency,
    METRIC_NAMES[r.metric],
    r.published,
    r.sim,
    signedPercent(r.relErr),
    ...(sr ? [sr[i]!.served, signedPercent(sr[i]!.relErr), signedPercent(sr[i]!.vsCore)] : []),
    r.harnessBound ? "client" : "",
  ]);
  console.log(
    formatTable({
      title: `${s.title} — ${s.fitted ? "fitted" : "predicted (no constant fitted to it)"}; profile ${c.profile}; ${s.inputTokens} in / ${s.outputTokens} out`,
      columns: sr ? ["c", "metric", "published", "core", "error", "served", "error", "served vs core", ""] : ["c", "metric", "published", "sim", "error", ""],
      rows,
    }),
  );
  console.log(`  source: ${s.source}`);
  if (s.lengthsNote) console.log(`  lengths: ${s.lengthsNote}`);
  console.log(
    `  median |error| ${(c.medianAbsErr * 100).toFixed(1)} %, largest ${(c.maxAbsErr * 100).toFixed(1)} % — ${meetsTargets(c) ? "meets" : "misses"} its targets${sr ? " (the core's)" : ""}${sr ? "" : "\n"}`,
  );
  if (served && sr) {
    const m = servedSummary(c, sr);
    const errors = served.points.reduce((a, p) => a + p.errors, 0);
    console.log(
      `  served: median |error| ${(m.median_abs_error * 100).toFixed(1)} %, largest ${(m.max_abs_error * 100).toFixed(1)} %; against the core median ${(m.median_abs_vs_core * 100).toFixed(1)} %, largest ${(m.max_abs_vs_core * 100).toFixed(1)} % — ${m.within_target_of_core ? "within" : "NOT within"} ${SERVED_VS_CORE * 100} % on every point; ${errors} failed requests; engine late p99 ms / slipped ${engineClockCell(served.engine_clock)}; ${served.wall_s} s\n`,
    );
  }
}

export const calibrateScenario: BenchScenario = {
  name: "calibrate",
  summary: "the sim-engine against published vLLM sweeps: per point, published vs sim and the error",
  usage: USAGE,
  options: {
    sweep: { type: "string" },
    runs: { type: "boolean" },
    run: { type: "string" },
    fit: { type: "boolean" },
    "without-gpu": { type: "string" },
    served: { type: "boolean" },
    strict: { type: "boolean" },
    noise: { type: "boolean" },
  },
  async run(args: ParsedArgs) {
    const id = stringFlag(args, "sweep");
    const sweeps = id === undefined ? PUBLISHED_SWEEPS : PUBLISHED_SWEEPS.filter((s) => s.id === id);
    if (sweeps.length === 0) throw new UsageError(`--sweep: unknown sweep '${id}' (expected one of ${PUBLISHED_SWEEPS.map((s) => s.id).join(", ")})`);
    const runId = stringFlag(args, "run");
    const runs = findRuns(runId);
    if (runs.length === 0) throw new UsageError(`--run: unknown run '${runId}' (expected one of ${GROUND_TRUTH_RUNS.map((r) => r.id).join(", ")})`);
    const withRuns = boolFlag(args, "runs") || runId !== undefined;
    const leftOut = stringFlag(args, "without-gpu");
    if (leftOut !== undefined && !boolFlag(args, "fit")) throw new UsageError("--without-gpu names the GPU a fit leaves out: give --fit too");
    if (leftOut !== undefined && !benchServeGpus().includes(leftOut))
      throw new UsageError(`--without-gpu: no bench-serve run on '${leftOut}' (expected one of ${benchServeGpus().join(", ")})`);
    if (boolFlag(args, "fit") && leftOut !== undefined) {
      const data = withoutGpu(
        leftOut,
        sweeps.filter((s) => s.fitted),
        runs.filter((r) => GROUND_TRUTH_FIT_WORKLOADS.includes(r.workload)),
      );
      const fitted = fitEfficiency(data.sweeps, data.runs, FITTED, (line) => console.error(line), data.serveRuns);
      console.log(JSON.stringify(fitted, null, 2));
      printLeftOut(leftOut, fitted, runs);
      return 0;
    }
    if (boolFlag(args, "fit")) {
      const fitted = fitEfficiency(
        sweeps.filter((s) => s.fitted),
        runs.filter((r) => GROUND_TRUTH_FIT_WORKLOADS.includes(r.workload)),
        FITTED,
        (line) => console.error(line),
      );
      console.log(JSON.stringify(fitted, null, 2));
      return 0;
    }
    const results = sweeps.map((s) => calibrateSweep(s));
    const servedOn = boolFlag(args, "served");
    if (!servedOn && boolFlag(args, "strict")) throw new UsageError("--strict judges the served engines' clocks: give --served too");
    const progress = progressPrinter();
    const served: (ServedSweep | undefined)[] = [];
    for (const c of results) served.push(servedOn ? await runServedSweep(c.sweep, c.pointMs, (line) => progress(line, false)) : undefined);
    const replayed = withRuns ? replayRuns(runs, (line) => progress(line, false)) : undefined;
    // One --run names a BLIS run: the bench-serve runs come with the whole set.
    const benchServe = withRuns && runId === undefined ? replayBenchServeRuns((line) => progress(line, false)) : undefined;
    const noise = boolFlag(args, "noise") ? calibrateNoise((line) => progress(line, false)) : undefined;
    if (args.values.json === true) {
      console.log(
        JSON.stringify({
          scenario: "calibrate",
          targets: TARGETS,
          constants: FITTED,
          sweeps: results.map((c, i) => ({
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
            ...servedJson(c, served[i]),
            points: c.rows.map((r, k) => ({
              concurrency: r.concurrency,
              metric: r.metric,
              published: r.published,
              sim: r.sim,
              rel_error: r.relErr,
              ...(r.harnessBound ? { client_bound: r.harnessBound } : {}),
              ...servedPointJson(c, served[i], k),
            })),
          })),
          ...(replayed ? { real_runs: runsJson(replayed) } : {}),
          ...(benchServe ? { bench_serve_runs: benchServeJson(benchServe) } : {}),
          ...(noise ? { noise: noiseJson(noise) } : {}),
        }),
      );
    } else {
      for (const [i, c] of results.entries()) printSweep(c, served[i]);
      if (replayed) printRuns(replayed);
      if (benchServe) printBenchServeRuns(benchServe);
      if (replayed && benchServe) printAllRealRuns(replayed, benchServe);
      if (noise) printNoise(noise);
      const clocks = engineClocksLine(results.map((c, i) => ({ name: c.sweep.id, clock: served[i]?.engine_clock })));
      if (clocks) console.log(clocks);
    }
    return strictVerdict(
      args,
      served.map((s) => s?.engine_clock),
    );
  },
};

/** A sweep's served summary for --json (nothing without --served). */
function servedJson(c: SweepCalibration, served: ServedSweep | undefined): Record<string, unknown> {
  if (!served) return {};
  return {
    served: {
      ...servedSummary(c, servedRows(c, served)),
      target_vs_core: SERVED_VS_CORE,
      failed_requests: served.points.reduce((a, p) => a + p.errors, 0),
      engine_clock: served.engine_clock,
      wall_s: served.wall_s,
    },
  };
}

/** A point's served figure for --json (nothing without --served). */
function servedPointJson(c: SweepCalibration, served: ServedSweep | undefined, k: number): Record<string, unknown> {
  if (!served) return {};
  const r = servedRows(c, served)[k]!;
  return { served: r.served, served_rel_error: r.relErr, served_vs_core: r.vsCore };
}
