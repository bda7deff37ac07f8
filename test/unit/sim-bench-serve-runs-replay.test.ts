/**
 * The sim's core against the `vllm bench serve` runs of GPUStack's
 * performance lab: the client's figures computed as `vllm bench serve`
 * computes them, the published E2E derived from its TTFT and TPOT, the KV
 * cache an engine that started must have had, and the A100 runs replayed
 * within the margins `bench calibrate --runs` shows.
 */
import { describe, expect, test } from "bun:test";
import {
  benchServeFigures,
  benchServeLengths,
  benchServeProfile,
  publishedBenchServe,
  replayBenchServeRun,
  startedEngineBlocks,
} from "../../src/sim/bench-serve-replay.ts";
import type { OpenLoopRecord } from "../../src/sim/open-loop.ts";
import { BENCH_SERVE_RUNS, BENCH_SERVE_WORKLOADS, countedBenchServe } from "../../src/sim/profiles/bench-serve-runs.ts";

/** A request sent at 0, its first token at `first`, then one every `gap` ms. */
function record(first: number, tokens: number, gap: number): OpenLoopRecord {
  const last = first + (tokens - 1) * gap;
  return { sentAt: 0, firstAt: first, lastAt: last, endAt: last, tokens, ok: true };
}

const run = (id: string) => BENCH_SERVE_RUNS.find((r) => r.id === id)!;

describe("vllm bench serve's figures", () => {
  test("ITL pools a gap per token (the role chunk's included) and TPOT divides by tokens − 1: 3/4 of TPOT at 4 tokens, as published", () => {
    const f = benchServeFigures([record(100, 4, 10), record(300, 4, 10)]);
    expect(f.tpot_mean_ms).toBeCloseTo(10, 9);
    expect(f.itl_mean_ms).toBeCloseTo(7.5, 9);
    expect(f.ttft_mean_ms).toBeCloseTo(200, 9);
    expect(f.e2e_mean_ms).toBeCloseTo(230, 9);
    // Qwen3-14B on A100, 1,000 requests of 4 tokens: ITL 175.01 against TPOT 233.35.
    const p = run("qwen3-14b-a100-random-128").published;
    expect(p.itlMeanMs / p.tpotMeanMs).toBeCloseTo(0.75, 2);
  });

  test("the published E2E mean is TTFT mean + TPOT mean × (tokens − 1), exact where every answer had the asked length", () => {
    const r = run("qwen3-32b-a100-random-2k");
    expect(r.published.outputTokens).toBe(500 * 100);
    expect(publishedBenchServe(r).e2e_mean_ms).toBeCloseTo(208_397.03 + 143.23 * 99, 6);
  });

  test("each request is the client's mean prompt plus Qwen3's 8 chat-template tokens, and the run's mean answer", () => {
    expect(benchServeLengths(run("qwen3-14b-h100-random-4k"))).toEqual({ promptTokens: 3996 + 8, outputTokens: 200 });
  });
});

describe("the runs as published", () => {
  test("each run sent its case's prompts, counted within 0.5 % of its input length, and answered at most its output length", () => {
    expect(BENCH_SERVE_RUNS.length).toBe(24);
    for (const r of BENCH_SERVE_RUNS) {
      const w = BENCH_SERVE_WORKLOADS[r.workload];
      const p = r.published;
      expect({ id: r.id, input: Math.abs(p.inputTokens / p.ok / w.inputLen - 1) <= 0.005, output: p.outputTokens <= p.ok * w.outputLen }).toEqual({
        id: r.id,
        input: true,
        output: true,
      });
    }
  });
});

describe("the engines the runs had", () => {
  test("Qwen3-32B on one 80 GB GPU started with max_model_len 40,960, so its KV cache held at least 2,560 blocks of 16", () => {
    for (const id of ["qwen3-32b-a100-random-4k", "qwen3-32b-h100-random-4k"]) {
      const p = benchServeProfile(run(id));
      expect(startedEngineBlocks(p)).toBeGreaterThanOrEqual(40_960 / 16);
    }
  });

  test("vLLM's defaults per GPU: 256 sequences and 2,048 tokens a step on A100, 1,024 and 8,192 on H100", () => {
    const a = benchServeProfile(run("qwen3-14b-a100-random-4k"));
    const h = benchServeProfile(run("qwen3-14b-h100-random-4k"));
    expect([a.maxNumSeqs, a.maxNumBatchedTokens, h.maxNumSeqs, h.maxNumBatchedTokens]).toEqual([256, 2048, 1024, 8192]);
  });
});

describe("the A100 runs replayed", () => {
  const a100 = BENCH_SERVE_RUNS.filter((r) => r.gpu === "a100-80gb" && r.arch !== "qwen3-235b-a22b" && countedBenchServe(r)).map((r) => replayBenchServeRun(r));

  test("every request answered, as in the real runs", () => {
    for (const c of a100) expect({ id: c.run.id, ok: c.sim.ok }).toEqual({ id: c.run.id, ok: c.run.published.ok });
  });

  test("Qwen3-14B and Qwen3-32B on one A100 (2K, 4K and 32K prompts, all sent at once): every column within 20 % on every run", () => {
    expect(a100.length).toBe(6);
    for (const c of a100)
      for (const [m, e] of Object.entries(c.relErr)) expect({ id: c.run.id, m, within: Math.abs(e) <= 0.2 }).toEqual({ id: c.run.id, m, within: true });
  });
});
