import { describe, expect, test } from "bun:test";
import type { RequestRecord } from "../../src/bench/replay/open-loop-driver.ts";
import { PUBLISHED_SETUP, PUBLISHED_STAGES, PUBLISHED_SUMMARY } from "../../src/bench/routing/published-37-capacity.ts";
import { type PolicyReport, ratios, ratioText, targetVerdict } from "../../src/bench/routing/routing-report.ts";
import { policyFigures, type RecordMeta } from "../../src/bench/routing/routing-summary.ts";
import * as S from "../../src/bench/routing/scaling.ts";

function rec(id: number, atMs: number, o: Partial<RequestRecord> = {}): RequestRecord {
  return { id, atMs, lateMs: 0, status: 200, durationMs: 1000, ttftMs: 100, outputTokens: 10, tpotMs: 20, endpoint: "sim-1", ...o };
}

describe("a policy's figures", () => {
  // ids 0-1: warm-up; 2-4: stage 0 (rate 10); 5-6: stage 1 (rate 20).
  const meta: RecordMeta[] = [
    { stage: -1, group: 0 },
    { stage: -1, group: 1 },
    { stage: 0, group: 0 },
    { stage: 0, group: 1 },
    { stage: 0, group: 0 },
    { stage: 1, group: 1 },
    { stage: 1, group: 0 },
  ];
  const records = [
    rec(0, 0, { ttftMs: 9_999 }),
    rec(1, 10, { ttftMs: 9_999 }),
    rec(2, 1000, { ttftMs: 100, durationMs: 1000, endpoint: "sim-1" }),
    rec(3, 1500, { ttftMs: 200, durationMs: 1500, endpoint: "sim-2" }), // ends at 3000
    rec(4, 1900, { ttftMs: 300, durationMs: 600, endpoint: "sim-1", outputTokens: 30, tpotMs: 10 }),
    rec(5, 2000, { ttftMs: 400, durationMs: 2000, endpoint: "sim-2" }), // ends at 4000
    rec(6, 2500, { status: 503, error: "HTTP 503 ADMISSION_QUEUE_FULL", ttftMs: undefined, outputTokens: 0, tpotMs: undefined, endpoint: "sim-1" }),
  ];
  const stages = [
    { rate: 10, durationS: 1 },
    { rate: 20, durationS: 1 },
  ];
  const f = policyFigures(records, (id) => meta[id]!, stages, 1);

  test("the warm-up is left out; success is answered ÷ sent", () => {
    expect(f.requests).toBe(5);
    expect(f.answered).toBe(4);
    expect(f.success).toBe(0.8);
    expect(f.errors).toEqual([{ error: "HTTP 503 ADMISSION_QUEUE_FULL", count: 1 }]);
  });

  test("per stage: output tokens of its answered requests ÷ (its first send → its last answer); the summary is their mean", () => {
    // Stage 0: 10 + 10 + 30 tokens over 1.0 → 3.0 s; stage 1: 10 tokens over 2.0 → 4.0 s.
    expect(f.stages.map((s) => s.output_tok_s)).toEqual([25, 5]);
    expect(f.stages.map((s) => [s.rate, s.requests, s.answered])).toEqual([
      [10, 3, 3],
      [20, 2, 1],
    ]);
    expect(f.output_tok_s).toBe(15);
    // req/s: 4 answered over 1.0 → 4.0 s.
    expect(f.req_s).toBe(1.33);
  });

  test("TTFT over answered requests; ITL mean weights each request by its gaps", () => {
    expect(f.ttft_s.p50).toBeCloseTo(0.25, 6);
    expect(f.ttft_s.mean).toBeCloseTo(0.25, 6);
    expect(f.stages[0]!.ttft_p90_s).toBeCloseTo(0.28, 6);
    // (9 × 20 + 9 × 20 + 29 × 10 + 9 × 20) / (9 + 9 + 29 + 9)
    expect(f.itl_mean_ms).toBeCloseTo((3 * 9 * 20 + 29 * 10) / 56, 2);
  });

  test("which pods served which group", () => {
    // Group 0: sim-1 (ids 2, 4); group 1: sim-2 (ids 3, 5): every prefix on one pod.
    expect(f.pods_per_group).toBe(1);
    expect(f.requests_per_pod).toEqual({ "sim-1": 2, "sim-2": 2 });
  });

  test("an engine clock X times faster: the client's wall times are multiplied back into simulated time", () => {
    const g = policyFigures(records, (id) => meta[id]!, stages, 4);
    expect(g.ttft_s.p50).toBeCloseTo(1, 6);
    expect(g.output_tok_s).toBe(3.8); // (25 / 4 + 5 / 4) / 2 = 3.75, rounded to 0.1
    expect(g.itl_mean_ms).toBeCloseTo(f.itl_mean_ms * 4, 1);
  });
});

describe("the scaling keeps the published cache ratios", () => {
  test("defaults: tokens ÷ 20, rates × 20, stages ÷ 40, the cache in whole blocks", () => {
    expect([S.DEFAULT_SYSTEM_LEN, S.DEFAULT_QUESTION_LEN, S.DEFAULT_OUTPUT_LEN]).toEqual([400, 50, 50]);
    expect(S.DEFAULT_KV_TOKENS).toBe(23_072);
    expect(S.DEFAULT_KV_TOKENS % 16).toBe(0);
    expect(S.DEFAULT_SYSTEM_LEN % 16).toBe(0); // the question starts on a KV block boundary
    expect(S.DEFAULT_STAGES.map((s) => s.rate)).toEqual([60, 80, 100, 120, 160, 200, 240, 300, 400]);
    expect(S.DEFAULT_STAGES.map((s) => s.durationS)).toEqual([5.25, 4.5, 3, 3, 2.25, 1.75, 1.5, 1.25, 1.25]);
    expect(S.DEFAULT_WARMUP).toEqual({ rate: 200, durationS: 0.625 });
    expect(S.DEFAULT_PODS).toBe(PUBLISHED_SETUP.pods);
    expect(S.DEFAULT_GROUPS).toBe(83);
  });

  test("the report's slot arithmetic gives the published 56 a pod, 224 in all, 37 % of them used", () => {
    expect(S.PUBLISHED_SHAPE.slotsPerPod).toBe(56);
    expect(S.PUBLISHED_SHAPE.slotsCluster).toBe(224);
    expect(S.PUBLISHED_SHAPE.workingSetOfCluster).toBeCloseTo(83 / 224, 6);
    const scaled = S.cacheShape({ pods: 4, kvTokens: S.DEFAULT_KV_TOKENS, groups: 83, systemLen: 400, questionLen: 50, outputLen: 50 });
    expect(scaled.slotsPerPod).toBe(56);
    expect(scaled.slotsCluster).toBe(224);
    expect(scaled.workingSetOfPod).toBeCloseTo(S.PUBLISHED_SHAPE.workingSetOfPod, 2);
    expect(scaled.workingSetOfPod).toBeGreaterThan(1); // no pod holds every prefix
    expect(scaled.sharedShareOfPrompt).toBe(S.PUBLISHED_SHAPE.sharedShareOfPrompt);
  });

  test("the published summary rows are the means of their per-stage rows (how the report's summary is computed)", () => {
    for (const row of PUBLISHED_SUMMARY) {
      const stages = PUBLISHED_STAGES[row.scheduler];
      expect(stages.map((s) => s.rate)).toEqual(PUBLISHED_SETUP.stages.map((s) => s.rate));
      const mean = stages.reduce((s, x) => s + x.outputTokS, 0) / stages.length;
      expect(Math.abs(mean - row.outputTokS)).toBeLessThan(0.5);
    }
  });
});

describe("against random, and the target", () => {
  const report = (name: string, tok: number, p90: number, published?: "random" | "estimated"): PolicyReport =>
    ({
      name,
      description: "",
      source: "",
      ...(published ? { published } : {}),
      figures: { output_tok_s: tok, ttft_s: { p50: 0, p90, mean: 0 } },
      prefix_cache_hit_rate: 0,
      preemptions: 0,
      send_lateness_ms: { p50: 0, p99: 0 },
      wall_s: 0,
    }) as unknown as PolicyReport;

  test("each policy ÷ random, with the published ratio where the policy stands beside a published scheduler", () => {
    const rows = ratios([report("random", 1000, 10, "random"), report("default", 2000, 0.25, "estimated")]);
    expect(rows[1]).toEqual({
      name: "default",
      output_tok_s: 2,
      ttft_p90: 0.025,
      published: { scheduler: "estimated", output_tok_s: 1.139, ttft_p90: 0.7586 },
    });
    expect(targetVerdict(rows)).toMatchObject({ policy: "default", output_tok_s_ratio: 2, ttft_p90_ratio: 0.025, met: true });
    expect(targetVerdict(ratios([report("random", 1000, 10), report("default", 1700, 0.4)]))!.met).toBe(true);
    expect(targetVerdict(ratios([report("random", 1000, 10), report("default", 1500, 0.1)]))!.met).toBe(false); // too few tokens
    expect(targetVerdict(ratios([report("random", 1000, 10), report("default", 1700, 0.6)]))!.met).toBe(false); // TTFT only 1/17
    expect(ratios([report("default", 1, 1)])).toEqual([]);
    expect(targetVerdict([])).toBeNull();
  });

  test("ratios read as people write them", () => {
    expect(ratioText(2.915)).toBe("2.92×");
    expect(ratioText(1 / 37)).toBe("1/37");
    expect(ratioText(0.4)).toBe("1/2.5");
    expect(ratioText(NaN)).toBe("-");
  });
});
