/**
 * `llmgw bench calibrate --runs`: the sim-engine's core against real vLLM
 * runs with their exact workloads (BLIS's public ground truth,
 * src/sim/profiles/ground-truth-runs.ts), stage by stage, in BLIS's columns,
 * with the medians over the runs BLIS counts beside BLIS's own and the
 * targets.
 */
import {
  GROUND_TRUTH_METRICS,
  type GroundTruthMetric,
  groundTruthMedians,
  publishedFigure,
  type RunComparison,
  replayGroundTruthRun,
} from "../sim/ground-truth.ts";
import { GROUND_TRUTH_FIT_WORKLOADS, GROUND_TRUTH_RUNS, GROUND_TRUTH_SOURCE, type GroundTruthRun } from "../sim/profiles/ground-truth-runs.ts";
import { BLIS_MEDIANS, RUN_TARGETS } from "./calibrate-targets.ts";
import { formatTable, signedPercent } from "./report.ts";

const COLUMN: Record<GroundTruthMetric, string> = {
  e2e_mean_ms: "E2E mean",
  ttft_mean_ms: "TTFT mean",
  ttft_p99_ms: "TTFT p99",
  itl_mean_ms: "ITL mean",
};

export function findRuns(id: string | undefined): readonly GroundTruthRun[] {
  return id === undefined ? GROUND_TRUTH_RUNS : GROUND_TRUTH_RUNS.filter((r) => r.id === id);
}

export function replayRuns(runs: readonly GroundTruthRun[], progress: (line: string) => void): RunComparison[] {
  return runs.map((run, i) => {
    progress(`replaying ${run.id} (${i + 1}/${runs.length})`);
    return replayGroundTruthRun(run);
  });
}

/** Which set a run belongs to. */
function role(run: GroundTruthRun): string {
  if (run.overload) return "overload";
  return GROUND_TRUTH_FIT_WORKLOADS.includes(run.workload) ? "fit" : "held out";
}

/** Median |error| per metric over a subset of the counted runs. */
function mediansOf(results: readonly RunComparison[], keep: (r: GroundTruthRun) => boolean): Record<GroundTruthMetric, number> {
  return groundTruthMedians(results.filter((r) => keep(r.run)));
}

export function printRuns(results: readonly RunComparison[]): void {
  const rows = results.flatMap((r) =>
    r.stages.map((s) => [
      r.run.id,
      s.rate,
      role(r.run),
      `${s.sim.ok}/${s.sim.ok + s.sim.failed} (${s.published.ok}/${s.published.ok + s.published.failed})`,
      ...GROUND_TRUTH_METRICS.flatMap((m) => [publishedFigure(s.published, m), s.sim[m], signedPercent(s.relErr[m])]),
    ]),
  );
  console.log(
    formatTable({
      title: "Real vLLM runs (H100 SXM, BLIS's ground truth) replayed on the sim's core: published, sim, error; ms",
      columns: ["run", "req/s", "set", "ok sim (real)", ...GROUND_TRUTH_METRICS.flatMap((m) => [COLUMN[m], "sim", "error"])],
      rows,
    }),
  );
  console.log(`  source: ${GROUND_TRUTH_SOURCE}`);
  const all = mediansOf(results, () => true);
  const held = mediansOf(results, (r) => !GROUND_TRUTH_FIT_WORKLOADS.includes(r.workload));
  const line = (name: string, m: Record<GroundTruthMetric, number>) =>
    `  ${name.padEnd(34)}${GROUND_TRUTH_METRICS.map((k) => `${COLUMN[k]} ${Number.isNaN(m[k]) ? "—" : `${(m[k] * 100).toFixed(1)} %`}`).join(" · ")}`;
  console.log("  median |error| per stage (overloaded runs left out, as BLIS leaves them):");
  console.log(line("every counted run", all));
  console.log(line("held out (not in the fit)", held));
  console.log(line("BLIS, 36 held-out runs", BLIS_MEDIANS));
  console.log(line("target", RUN_TARGETS));
  const kv = results.map((r) => `${r.run.arch} tp${r.run.tp} ${r.kvBlocks} vs ${r.run.kvBlocks}`);
  console.log(`  KV blocks per GPU, derived vs the engine's: ${[...new Set(kv)].join("; ")}\n`);
}

export function runsJson(results: readonly RunComparison[]): Record<string, unknown> {
  return {
    source: GROUND_TRUTH_SOURCE,
    targets: RUN_TARGETS,
    blis_medians: BLIS_MEDIANS,
    medians: mediansOf(results, () => true),
    held_out_medians: mediansOf(results, (r) => !GROUND_TRUTH_FIT_WORKLOADS.includes(r.workload)),
    runs: results.map((r) => ({
      id: r.run.id,
      dir: r.run.dir,
      set: role(r.run),
      kv_blocks: { derived: r.kvBlocks, engine: r.run.kvBlocks },
      preemptions: r.preemptions,
      stages: r.stages.map((s) => ({
        rate: s.rate,
        published: s.published,
        sim: s.sim,
        rel_error: s.relErr,
      })),
    })),
  };
}
