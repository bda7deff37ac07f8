/** What `llmgw bench calibrate` holds the sim to, and the published figures it compares against. */
import type { GroundTruthMetric } from "../sim/ground-truth.ts";

/** Published sweeps: median ≤ 15 % per fitted table, no point over 35 %, an unfitted pair within 25 % median. */
export const TARGETS = { fittedMedian: 0.15, point: 0.35, unfittedMedian: 0.25 } as const;

/** Real runs: median |error| over the stages of the runs counted. */
export const RUN_TARGETS: Record<GroundTruthMetric, number> = { e2e_mean_ms: 0.05, ttft_mean_ms: 0.12, ttft_p99_ms: 0.2, itl_mean_ms: 0.05 };

/** BLIS's published medians over its 36 held-out real runs (its blog, "how BLIS learns latency"). */
export const BLIS_MEDIANS: Record<GroundTruthMetric, number> = { e2e_mean_ms: 0.067, ttft_mean_ms: 0.176, ttft_p99_ms: 0.29, itl_mean_ms: 0.071 };
