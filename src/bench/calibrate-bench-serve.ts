/**
 * `llmgw bench calibrate --runs`, second part: the sim's core against the
 * `vllm bench serve` runs of GPUStack's performance lab (A100 and H100,
 * src/sim/profiles/bench-serve-runs.ts), one row per run in the columns of
 * the other real runs, with the medians over every counted run and per GPU;
 * and `--fit --without-gpu`: the constants fitted without one GPU's data and
 * that GPU's medians under them (leave one GPU out).
 */
import { type BenchServeComparison, replayBenchServeRun } from "../sim/bench-serve-replay.ts";
import { GROUND_TRUTH_METRICS, type GroundTruthMetric, type RunComparison, replayGroundTruthRun } from "../sim/ground-truth.ts";
import { BENCH_SERVE_RUNS, BENCH_SERVE_SOURCE, type BenchServeRun, countedBenchServe } from "../sim/profiles/bench-serve-runs.ts";
import { resolveProfile } from "../sim/profiles/catalog.ts";
import type { EfficiencyConstants } from "../sim/profiles/efficiency.ts";
import { GROUND_TRUTH_ENGINE, type GroundTruthRun } from "../sim/profiles/ground-truth-runs.ts";
import type { PublishedSweep } from "../sim/profiles/published-sweeps.ts";
import { RUN_TARGETS } from "./calibrate-targets.ts";
import { formatTable, median, signedPercent } from "./report.ts";

const COLUMN: Record<GroundTruthMetric, string> = {
  e2e_mean_ms: "E2E mean",
  ttft_mean_ms: "TTFT mean",
  ttft_p99_ms: "TTFT p99",
  itl_mean_ms: "ITL mean",
};

export function replayBenchServeRuns(progress: (line: string) => void, efficiency?: EfficiencyConstants): BenchServeComparison[] {
  return BENCH_SERVE_RUNS.map((run, i) => {
    progress(`replaying ${run.id} (${i + 1}/${BENCH_SERVE_RUNS.length})`);
    return replayBenchServeRun(run, efficiency);
  });
}

/** Median |error| per column over the counted runs `keep` selects. */
function benchServeMedians(results: readonly BenchServeComparison[], keep: (r: BenchServeRun) => boolean = () => true): Record<GroundTruthMetric, number> {
  const rows = results.filter((c) => countedBenchServe(c.run) && keep(c.run));
  const out = {} as Record<GroundTruthMetric, number>;
  for (const m of GROUND_TRUTH_METRICS) out[m] = rows.length > 0 ? median(rows.map((c) => Math.abs(c.relErr[m]))) : NaN;
  return out;
}

function medianLine(name: string, m: Record<GroundTruthMetric, number>): string {
  return `  ${name.padEnd(34)}${GROUND_TRUTH_METRICS.map((k) => `${COLUMN[k]} ${Number.isNaN(m[k]) ? "—" : `${(m[k] * 100).toFixed(1)} %`}`).join(" · ")}`;
}

/** The GPUs these runs are on. */
export function benchServeGpus(): string[] {
  return [...new Set(BENCH_SERVE_RUNS.map((r) => r.gpu))];
}

export function printBenchServeRuns(results: readonly BenchServeComparison[]): void {
  const rows = results.map((c) => [
    c.run.id,
    countedBenchServe(c.run) ? "counted" : "API server",
    `${c.kvBlocks}${c.kvBlocks !== c.derivedKvBlocks ? ` (${c.derivedKvBlocks})` : ""}`,
    ...GROUND_TRUTH_METRICS.flatMap((m) => [c.published[m], c.sim[m], signedPercent(c.relErr[m])]),
  ]);
  console.log(
    formatTable({
      title: "Real vLLM runs (vllm bench serve, all requests at once; A100 80GB and H100) replayed on the sim's core: published, sim, error; ms",
      columns: ["run", "set", "KV blocks (derived)", ...GROUND_TRUTH_METRICS.flatMap((m) => [COLUMN[m], "sim", "error"])],
      rows,
    }),
  );
  console.log(`  source: ${BENCH_SERVE_SOURCE}; E2E published = TTFT mean + TPOT mean × (tokens − 1)`);
  console.log("  median |error| per run (the 128-token bursts, API-server-bound, left out):");
  console.log(medianLine("every counted run", benchServeMedians(results)));
  for (const gpu of benchServeGpus())
    console.log(
      medianLine(
        gpu,
        benchServeMedians(results, (r) => r.gpu === gpu),
      ),
    );
  console.log(medianLine("target", RUN_TARGETS));
  console.log("");
}

export function benchServeJson(results: readonly BenchServeComparison[]): Record<string, unknown> {
  return {
    source: BENCH_SERVE_SOURCE,
    medians: benchServeMedians(results),
    per_gpu: Object.fromEntries(benchServeGpus().map((g) => [g, benchServeMedians(results, (r) => r.gpu === g)])),
    runs: results.map((c) => ({
      id: c.run.id,
      page: c.run.page,
      counted: countedBenchServe(c.run),
      kv_blocks: { replayed: c.kvBlocks, derived: c.derivedKvBlocks },
      preemptions: c.preemptions,
      published: c.published,
      sim: c.sim,
      rel_error: c.relErr,
    })),
  };
}

/** What a fit without `gpu` may use: the sweeps, BLIS's runs (H100) and the counted bench-serve runs on other GPUs. */
export function withoutGpu(
  gpu: string,
  sweeps: readonly PublishedSweep[],
  runs: readonly GroundTruthRun[],
): { sweeps: PublishedSweep[]; runs: GroundTruthRun[]; serveRuns: BenchServeRun[] } {
  return {
    sweeps: sweeps.filter((s) => resolveProfile(s.profile).profile.gpu.id !== gpu),
    runs: GROUND_TRUTH_ENGINE.gpu === gpu ? [] : [...runs],
    serveRuns: BENCH_SERVE_RUNS.filter((r) => r.gpu !== gpu && countedBenchServe(r)),
  };
}

/**
 * The held-out GPU's medians under the constants fitted without it: its
 * bench-serve runs, and for the H100 BLIS's stages too (every counted one,
 * full length), then all of that GPU's counted rows together.
 */
export function printLeftOut(gpu: string, fitted: EfficiencyConstants, blisRuns: readonly GroundTruthRun[]): void {
  const serve = BENCH_SERVE_RUNS.filter((r) => r.gpu === gpu).map((r) => replayBenchServeRun(r, fitted));
  console.log(medianLine(`${gpu} bench-serve, fitted without`, benchServeMedians(serve)));
  if (GROUND_TRUTH_ENGINE.gpu !== gpu) return;
  const blis = blisRuns.filter((r) => !r.overload).map((r) => replayGroundTruthRun(r, fitted));
  const errs = [...blis.flatMap((r) => r.stages.map((s) => s.relErr)), ...serve.filter((c) => countedBenchServe(c.run)).map((c) => c.relErr)];
  const blisOnly = {} as Record<GroundTruthMetric, number>;
  const all = {} as Record<GroundTruthMetric, number>;
  for (const m of GROUND_TRUTH_METRICS) {
    blisOnly[m] = median(blis.flatMap((r) => r.stages.map((s) => Math.abs(s.relErr[m]))));
    all[m] = median(errs.map((e) => Math.abs(e[m])));
  }
  console.log(medianLine(`${gpu} BLIS stages, fitted without`, blisOnly));
  console.log(medianLine(`${gpu} every row, fitted without`, all));
}

/** Median |error| per column over every counted real row: BLIS's stages (overloaded runs left out) and the counted bench-serve runs. */
export function printAllRealRuns(blis: readonly RunComparison[], serve: readonly BenchServeComparison[]): void {
  const errs = [
    ...blis.filter((r) => !r.run.overload).flatMap((r) => r.stages.map((s) => s.relErr)),
    ...serve.filter((c) => countedBenchServe(c.run)).map((c) => c.relErr),
  ];
  const out = {} as Record<GroundTruthMetric, number>;
  for (const m of GROUND_TRUTH_METRICS) out[m] = median(errs.map((e) => Math.abs(e[m])));
  console.log(`  median |error| over every counted real row (${errs.length}: BLIS's stages and the bench-serve runs):`);
  console.log(medianLine("all real runs", out));
  console.log(medianLine("target", RUN_TARGETS));
  console.log("");
}
