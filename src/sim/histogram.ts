/**
 * A cheap Prometheus-style histogram (fixed upper bounds, per-bucket counts
 * summed at scrape time) and the bucket lists vLLM v1 uses
 * (vllm/v1/metrics/loggers.py), so scraped buckets line up with a real engine.
 */

export class Histogram {
  readonly bounds: readonly number[];
  /** Non-cumulative counts; the last slot is +Inf. */
  private readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(bounds: readonly number[]) {
    this.bounds = bounds;
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(v: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && v > b[i]!) i++;
    this.counts[i]!++;
    this.sum += v;
    this.count++;
  }

  /** Cumulative counts per bound, then +Inf. */
  cumulative(): number[] {
    const out: number[] = [];
    let acc = 0;
    for (const c of this.counts) {
      acc += c;
      out.push(acc);
    }
    return out;
  }
}

export const TTFT_BUCKETS_S = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
export const ITL_BUCKETS_S = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];
export const REQUEST_LATENCY_BUCKETS_S = [
  0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
];

/** vllm:iteration_tokens_total: tokens a step's outputs account for. */
export const ITERATION_TOKEN_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384];
/** vllm:request_params_n. */
export const PARAMS_N_BUCKETS = [1, 2, 5, 10, 20];

/** vLLM's build_1_2_5_buckets(max): 1, 2, 5, 10, 20, 50 … up to `max`. */
export function buckets125(max: number): number[] {
  const out: number[] = [];
  for (let exp = 1; ; exp *= 10) {
    for (const m of [1, 2, 5]) {
      const v = m * exp;
      if (v > max) return out;
      out.push(v);
    }
  }
}
