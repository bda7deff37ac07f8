/**
 * llm-d's "37-capacity" routing experiment, as published: its setup and its
 * figures, quoted from the report (github.com/llm-d/llm-d-kv-cache-manager,
 * benchmarking/37-capacity/README.md, an inference-perf report). Data only.
 */

export const PUBLISHED_SOURCE = "llm-d/llm-d-kv-cache-manager, benchmarking/37-capacity/README.md (inference-perf report)";

/** The published run's shape (per pod: 4 × H100 serving Llama-3.1-70B-Instruct). */
export const PUBLISHED_SETUP = {
  pods: 4,
  model: "meta-llama/Llama-3.1-70B-Instruct",
  /** Effective KV capacity per pod, tokens (the report's KV_cap). */
  kvTokensPerPod: 461_376,
  groups: 83,
  perGroup: 3,
  systemLen: 8_000,
  questionLen: 1_000,
  outputLen: 1_000,
  warmup: { rate: 10, durationS: 25 },
  stages: [
    { rate: 3, durationS: 210 },
    { rate: 4, durationS: 180 },
    { rate: 5, durationS: 120 },
    { rate: 6, durationS: 120 },
    { rate: 8, durationS: 90 },
    { rate: 10, durationS: 70 },
    { rate: 12, durationS: 60 },
    { rate: 15, durationS: 50 },
    { rate: 20, durationS: 50 },
  ],
  /**
   * The report's slot arithmetic: requests in flight per pod assumed at the
   * higher stages, and the live decode length (half the output) they hold
   * beside their question.
   */
  inFlightPerPod: 8,
} as const;

export const PUBLISHED_SCHEDULERS = ["precise", "estimated", "random", "load"] as const;
export type PublishedScheduler = (typeof PUBLISHED_SCHEDULERS)[number];

interface PublishedRow {
  scheduler: PublishedScheduler;
  /** The report's name for it. */
  experiment: string;
  /** What it scores. */
  what: string;
  outputTokS: number;
  reqS: number;
  success: number;
  ttftP90S: number;
  ttftMeanS: number;
  /** As published: inference-perf's ITL, over its stream events (a token's time is ITL_EVENTS_PER_TOKEN times it). */
  itlMeanS: number;
}

/**
 * inference-perf reads about two stream events a token, so half its ITL
 * gaps are near 0 (the report's ITL p50 is 0.0000 for every scheduler) and
 * its ITL mean is half the time a token takes. On inference-perf's own
 * per-request records of other runs (inference-sim/training), twice the
 * ITL mean matches (E2E − TTFT) ÷ (tokens − 1) within 1 %.
 */
export const ITL_EVENTS_PER_TOKEN = 2;

/** "Summary across QPS". */
export const PUBLISHED_SUMMARY: readonly PublishedRow[] = [
  {
    scheduler: "precise",
    experiment: "precise-prefix-cache_load",
    what: "prefix from vLLM's KV events ×2 + KV ×1 + active requests ×1",
    outputTokS: 5380.9,
    reqS: 6.913,
    success: 1,
    ttftP90S: 0.409,
    ttftMeanS: 0.259,
    itlMeanS: 0.02,
  },
  {
    scheduler: "estimated",
    experiment: "estimate-prefix-cache_load",
    what: "prefix estimated by the router (LRU) ×2 + KV ×1 + active requests ×1",
    outputTokS: 3408.6,
    reqS: 6.92,
    success: 1,
    ttftP90S: 64.43,
    ttftMeanS: 25.337,
    itlMeanS: 0.026,
  },
  {
    scheduler: "random",
    experiment: "random",
    what: "a random pod",
    outputTokS: 2991.5,
    reqS: 7.122,
    success: 1,
    ttftP90S: 84.938,
    ttftMeanS: 40.915,
    itlMeanS: 0.026,
  },
  {
    scheduler: "load",
    experiment: "load",
    what: "KV ×1 + active requests ×1",
    outputTokS: 2669.0,
    reqS: 6.921,
    success: 0.9771,
    ttftP90S: 98.318,
    ttftMeanS: 40.689,
    itlMeanS: 0.026,
  },
];

/** Per stage ("Per-QPS Results"): output tok/s and TTFT p90 (s), for the per-stage table. */
export const PUBLISHED_STAGES: Readonly<Record<PublishedScheduler, readonly { rate: number; outputTokS: number; ttftP90S: number }[]>> = {
  precise: [
    { rate: 3, outputTokS: 2590.0, ttftP90S: 0.4 },
    { rate: 4, outputTokS: 3345.2, ttftP90S: 0.486 },
    { rate: 5, outputTokS: 3916.7, ttftP90S: 0.4 },
    { rate: 6, outputTokS: 4640.3, ttftP90S: 0.4 },
    { rate: 8, outputTokS: 5557.1, ttftP90S: 0.4 },
    { rate: 10, outputTokS: 6264.0, ttftP90S: 0.4 },
    { rate: 12, outputTokS: 6765.9, ttftP90S: 0.4 },
    { rate: 15, outputTokS: 7345.1, ttftP90S: 0.4 },
    { rate: 20, outputTokS: 8003.9, ttftP90S: 0.4 },
  ],
  estimated: [
    { rate: 3, outputTokS: 2573.6, ttftP90S: 2.2 },
    { rate: 4, outputTokS: 3326.3, ttftP90S: 3.402 },
    { rate: 5, outputTokS: 3691.2, ttftP90S: 4.322 },
    { rate: 6, outputTokS: 3724.3, ttftP90S: 30.211 },
    { rate: 8, outputTokS: 3571.6, ttftP90S: 64.28 },
    { rate: 10, outputTokS: 3798.6, ttftP90S: 66.291 },
    { rate: 12, outputTokS: 3773.5, ttftP90S: 81.511 },
    { rate: 15, outputTokS: 3200.9, ttftP90S: 103.779 },
    { rate: 20, outputTokS: 3017.1, ttftP90S: 165.276 },
  ],
  random: [
    { rate: 3, outputTokS: 2505.7, ttftP90S: 2.0 },
    { rate: 4, outputTokS: 2829.5, ttftP90S: 22.814 },
    { rate: 5, outputTokS: 2898.2, ttftP90S: 30.994 },
    { rate: 6, outputTokS: 2955.9, ttftP90S: 56.371 },
    { rate: 8, outputTokS: 3108.8, ttftP90S: 74.757 },
    { rate: 10, outputTokS: 3117.3, ttftP90S: 88.089 },
    { rate: 12, outputTokS: 3140.8, ttftP90S: 96.284 },
    { rate: 15, outputTokS: 3126.2, ttftP90S: 128.434 },
    { rate: 20, outputTokS: 3241.0, ttftP90S: 197.01 },
  ],
  load: [
    { rate: 3, outputTokS: 2545.4, ttftP90S: 3.299 },
    { rate: 4, outputTokS: 2967.6, ttftP90S: 15.818 },
    { rate: 5, outputTokS: 2943.6, ttftP90S: 31.501 },
    { rate: 6, outputTokS: 2656.5, ttftP90S: 88.121 },
    { rate: 8, outputTokS: 2506.3, ttftP90S: 101.514 },
    { rate: 10, outputTokS: 2620.3, ttftP90S: 129.421 },
    { rate: 12, outputTokS: 2897.6, ttftP90S: 115.098 },
    { rate: 15, outputTokS: 2549.1, ttftP90S: 148.0 },
    { rate: 20, outputTokS: 2334.5, ttftP90S: 208.052 },
  ],
};
