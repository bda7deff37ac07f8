/**
 * The sim's core against BLIS's real vLLM runs (`llmgw bench calibrate
 * --runs`, deterministic on the virtual clock), each stage replayed at a
 * fifth of its length to keep the test short: the medians over the runs
 * within the targets, and the mixture of experts' token time as close as the
 * dense models'. The reasoning runs are left out here: an engine past its
 * capacity builds its queue over the whole stage, so a fifth of it says
 * little.
 */
import { expect, test } from "bun:test";
import { RUN_TARGETS } from "../../src/bench/calibrate-targets.ts";
import { GROUND_TRUTH_METRICS, groundTruthMedians, replayGroundTruthRun } from "../../src/sim/ground-truth.ts";
import { GROUND_TRUTH_RUNS } from "../../src/sim/profiles/ground-truth-runs.ts";

const runs = GROUND_TRUTH_RUNS.filter((r) => r.workload !== "reasoning").map((r) => replayGroundTruthRun(r, undefined, 0.2));

/**
 * A fifth of a stage has a fifth of its requests: its TTFT p99 rests on a
 * handful of them and moves with the draw of arrivals (12 to 23 % for two
 * draws), so it is held here to 30 %, about BLIS's; the full-length runs'
 * verdict is `bench calibrate --runs`'s.
 */
const SHORT_RUN_TARGETS = { ...RUN_TARGETS, ttft_p99_ms: 0.3 };

test("over twelve real runs (four models, TP 1 to 4, one a mixture of experts), each column's median error is within its target", () => {
  const medians = groundTruthMedians(runs);
  for (const m of GROUND_TRUTH_METRICS) expect({ m, within: medians[m] <= SHORT_RUN_TARGETS[m] }).toEqual({ m, within: true });
});

test("every request of those runs is answered: none of the sim's engines falls behind an arrival rate the real one kept up with", () => {
  for (const r of runs)
    for (const s of r.stages) expect({ run: r.run.id, rate: s.rate, failed: s.sim.failed }).toEqual({ run: r.run.id, rate: s.rate, failed: 0 });
});

test("Mixtral-8x7B on two H100s: its time per token within 5 % at every rate, as the dense models'", () => {
  const moe = runs.filter((r) => r.run.arch === "mixtral-8x7b").flatMap((r) => r.stages);
  expect(moe.length).toBe(5);
  for (const s of moe) expect(Math.abs(s.relErr.itl_mean_ms)).toBeLessThan(0.05);
});
