/**
 * llm-d's "optimized baseline" routing experiment, as published: its setup
 * and its figures, quoted from the guide's benchmark report and workload
 * (github.com/llm-d/llm-d, guides/optimized-baseline/). Data only.
 */
import type { Stage } from "./shared-prefix-workload.ts";

export const OPTIMIZED_BASELINE_SOURCE =
  "llm-d/llm-d, guides/optimized-baseline/benchmark-results/vllm-qwen3-32b-h100/README.md (inference-perf; workload guides/optimized-baseline/benchmark-templates/shared_prefix.yaml)";

/** The published run's shape: 8 vLLM pods of Qwen3-32B, each on 2 × H100 (TP2). */
export const OPTIMIZED_BASELINE_SETUP = {
  pods: 8,
  model: "Qwen/Qwen3-32B",
  /** The sim-engine profile of those pods (llmgw sim-engine --list-profiles). */
  profile: "h100x2-qwen3-32b",
  groups: 150,
  perGroup: 5,
  systemLen: 6_000,
  questionLen: 1_200,
  outputLen: 1_000,
  warmup: { rate: 15, durationS: 50 } as Stage,
  stages: [
    { rate: 3, durationS: 20 },
    { rate: 10, durationS: 20 },
    { rate: 15, durationS: 20 },
    { rate: 20, durationS: 38 },
    { rate: 22, durationS: 34 },
    { rate: 25, durationS: 30 },
    { rate: 30, durationS: 25 },
    { rate: 35, durationS: 21 },
    { rate: 40, durationS: 38 },
    { rate: 43, durationS: 36 },
    { rate: 46, durationS: 33 },
    { rate: 49, durationS: 30 },
    { rate: 52, durationS: 29 },
    { rate: 55, durationS: 27 },
    { rate: 57, durationS: 26 },
    { rate: 60, durationS: 25 },
  ] as readonly Stage[],
} as const;

/** The two published arms and the bench policy each stands beside. */
export const OPTIMIZED_BASELINE_ARMS = [
  { arm: "round-robin", policy: "round-robin", what: "a Kubernetes Service round-robining over the same 8 pods (no endpoint picker)" },
  { arm: "llm-d", policy: "default", what: "llm-d's router: prefix-cache-affinity filter + token-load scorer" },
] as const;
export type OptimizedBaselineArm = (typeof OPTIMIZED_BASELINE_ARMS)[number]["arm"];

/** Per rate: output tok/s, TTFT p50 and p90 (s) of each arm; null where the report's latency histogram for the stage was empty (printed 0.0). */
interface PublishedRate {
  rate: number;
  outputTokS: Record<OptimizedBaselineArm, number>;
  ttftP50S: Record<OptimizedBaselineArm, number | null>;
  ttftP90S: Record<OptimizedBaselineArm, number | null>;
}

function row(rate: number, rr: number, llmd: number, rrP50: number, llmdP50: number, rrP90: number, llmdP90: number): PublishedRate {
  const seen = (x: number) => (x === 0 ? null : x);
  return {
    rate,
    outputTokS: { "round-robin": rr, "llm-d": llmd },
    ttftP50S: { "round-robin": seen(rrP50), "llm-d": seen(llmdP50) },
    ttftP90S: { "round-robin": seen(rrP90), "llm-d": seen(llmdP90) },
  };
}

/** "Per-rate breakdown across the full ladder". */
export const OPTIMIZED_BASELINE_RATES: readonly PublishedRate[] = [
  row(3, 1_889, 1_511, 0, 0, 0, 0),
  row(10, 4_944, 4_597, 0, 0, 0, 0),
  row(15, 6_066, 8_995, 0, 0, 0, 0),
  row(20, 4_555, 6_656, 0.9, 0.4, 2.4, 4.2),
  row(22, 6_239, 10_809, 18.3, 0.2, 46.1, 1.4),
  row(25, 6_350, 10_452, 0.4, 0.2, 0.9, 0.2),
  row(30, 6_251, 10_509, 0.8, 0.1, 4.9, 0.2),
  row(35, 6_544, 12_290, 21.0, 0.1, 46.2, 0.2),
  row(40, 6_228, 14_134, 20.0, 0.1, 37.9, 0.3),
  row(43, 6_860, 13_522, 25.7, 0.2, 61.9, 0.2),
  row(46, 6_526, 14_050, 20.4, 0.1, 66.8, 0.2),
  row(49, 6_956, 14_941, 66.9, 0.9, 139.9, 2.1),
  row(52, 7_049, 14_542, 69.9, 0.3, 143.8, 1.3),
  row(55, 6_402, 14_607, 78.3, 0.1, 158.5, 0.2),
  row(57, 6_317, 13_451, 83.1, 0.2, 153.3, 19.9),
  row(60, 6_764, 13_528, 88.1, 0.2, 154.1, 0.9),
];

/** The summary: peak sustained output tok/s, and TTFT at the top of the ladder (rate 60). */
export const OPTIMIZED_BASELINE_SUMMARY: Record<OptimizedBaselineArm, { peakOutputTokS: number; topTtftP50S: number; topTtftP90S: number }> = {
  "round-robin": { peakOutputTokS: 7_049, topTtftP50S: 88.1, topTtftP90S: 154.1 },
  "llm-d": { peakOutputTokS: 14_941, topTtftP50S: 0.2, topTtftP90S: 0.9 },
};
