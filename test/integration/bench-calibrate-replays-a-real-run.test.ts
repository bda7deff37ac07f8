/**
 * `llmgw bench calibrate --run ID`: one of BLIS's real vLLM runs replayed on
 * the sim's core from the command line, its stages in BLIS's columns in the
 * JSON report; an unknown run is a usage error naming the ones there are.
 */
import { expect, test } from "bun:test";
import { runBench, runBenchJson } from "../helpers/bench-json.ts";

interface Report {
  real_runs: {
    source: string;
    medians: Record<string, number>;
    runs: {
      id: string;
      set: string;
      kv_blocks: { derived: number; engine: number };
      stages: { rate: number; sim: { ok: number; failed: number }; rel_error: Record<string, number> }[];
    }[];
  };
}

test("one real run from the command line: both stages replayed, every request answered, BLIS's four columns with their errors", async () => {
  const r = await runBenchJson<Report>(["calibrate", "--sweep", "h100x2-qwen3-32b-prefill", "--run", "codellama-34b-tp2-codegen"]);
  expect(r.real_runs.source).toContain("inference-sim/training");
  expect(r.real_runs.runs.map((x) => [x.id, x.set])).toEqual([["codellama-34b-tp2-codegen", "fit"]]);
  const run = r.real_runs.runs[0]!;
  expect(run.stages.map((s) => s.rate)).toEqual([5, 10]);
  expect(run.stages.map((s) => [s.sim.ok, s.sim.failed])).toEqual([
    [3000, 0],
    [6000, 0],
  ]);
  for (const s of run.stages) expect(Object.keys(s.rel_error).sort()).toEqual(["e2e_mean_ms", "itl_mean_ms", "ttft_mean_ms", "ttft_p99_ms"]);
  expect(Math.abs(run.kv_blocks.derived / run.kv_blocks.engine - 1)).toBeLessThan(0.05);
  expect(Object.keys(r.real_runs.medians).length).toBe(4);
}, 120_000);

test("an unknown run is a usage error that names the runs there are", async () => {
  const r = await runBench(["calibrate", "--run", "gpt-5-tp64-chat"]);
  expect(r.code).toBe(2);
  expect(r.stderr).toContain("--run: unknown run 'gpt-5-tp64-chat'");
  expect(r.stderr).toContain("mixtral-8x7b-tp2-codegen");
});
