/**
 * The sim-engine's fitted constants against every published table
 * (`llmgw bench calibrate`, deterministic on the virtual clock): each table
 * within its median target, the engine-bound token gaps and throughput
 * within 20 %, and the one published long prefill of a large model on
 * several GPUs, which alone fixes compute efficiency, within 15 %.
 */
import { expect, test } from "bun:test";
import { TARGETS } from "../../src/bench/calibrate-targets.ts";
import { calibrateSweep } from "../../src/sim/calibration.ts";
import { PUBLISHED_SWEEPS } from "../../src/sim/profiles/published-sweeps.ts";

const tables = PUBLISHED_SWEEPS.map((s) => calibrateSweep(s));

test("every published table is within its median target: 15 % where fitted, 25 % where predicted", () => {
  const medians = tables.map((t) => ({ id: t.sweep.id, within: t.medianAbsErr <= (t.sweep.fitted ? TARGETS.fittedMedian : TARGETS.unfittedMedian) }));
  expect(medians.filter((m) => !m.within)).toEqual([]);
});

test("token gaps and output throughput are within 20 % at every engine-bound point", () => {
  const off = tables.flatMap((t) =>
    t.rows
      .filter((r) => r.harnessBound === undefined && ["itl_p50_ms", "tpot_p50_ms", "out_tok_s"].includes(r.metric))
      .filter((r) => Math.abs(r.relErr) > 0.2)
      .map((r) => `${t.sweep.id} c=${r.concurrency} ${r.metric} ${(r.relErr * 100).toFixed(1)} %`),
  );
  expect(off).toEqual([]);
});

test("a lone 8,192-token prefill of Qwen3-32B on two H100s takes within 15 % of llm-d's measured 514 ms", () => {
  const t = tables.find((x) => x.sweep.id === "h100x2-qwen3-32b-prefill")!;
  expect(t.rows.map((r) => r.metric)).toEqual(["ttft_p50_ms"]);
  expect(t.rows[0]!.published).toBeCloseTo(514.3, 1);
  expect(Math.abs(t.rows[0]!.relErr)).toBeLessThan(0.15);
});
