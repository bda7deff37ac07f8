/**
 * A histogram of positive values (latencies in ms) in logarithmic buckets,
 * each GROWTH× the one below: quantiles within ±1 % of the true value, in a
 * few hundred counters whatever the number of samples, and mergeable. The
 * replay keeps every inter-token gap here (millions of them in a long run)
 * instead of in a list. Pure.
 */

/** Bucket growth: a quantile is reported as its bucket's geometric middle, ≤ 1 % from any value in it. */
const GROWTH = 1.02;
/** Values at or below this (ms) share the first bucket. */
const FLOOR = 0.001;
const LOG_GROWTH = Math.log(GROWTH);

/** The wire form (JSON between the load process and the bench). */
export interface LogHistogramData {
  /** bucket index → count (sparse). */
  buckets: Record<string, number>;
  count: number;
  sum: number;
  /** Σ value²: with sum and count, the standard deviation. */
  sumSq: number;
  /** null when empty (JSON has no Infinity). */
  min: number | null;
  max: number | null;
}

export class LogHistogram {
  private readonly buckets = new Map<number, number>();
  count = 0;
  sum = 0;
  sumSq = 0;
  min = Infinity;
  max = -Infinity;

  add(value: number): void {
    if (!Number.isFinite(value)) return;
    const v = Math.max(value, FLOOR);
    const b = Math.floor(Math.log(v / FLOOR) / LOG_GROWTH);
    this.buckets.set(b, (this.buckets.get(b) ?? 0) + 1);
    this.count++;
    this.sum += value;
    this.sumSq += value * value;
    if (value < this.min) this.min = value;
    if (value > this.max) this.max = value;
  }

  merge(other: LogHistogram): void {
    for (const [b, n] of other.buckets) this.buckets.set(b, (this.buckets.get(b) ?? 0) + n);
    this.count += other.count;
    this.sum += other.sum;
    this.sumSq += other.sumSq;
    this.min = Math.min(this.min, other.min);
    this.max = Math.max(this.max, other.max);
  }

  get mean(): number {
    return this.count === 0 ? NaN : this.sum / this.count;
  }

  /** Population standard deviation (numpy's std, as vLLM's benchmark reports it), NaN when empty. */
  get std(): number {
    if (this.count === 0) return NaN;
    const m = this.sum / this.count;
    return Math.sqrt(Math.max(0, this.sumSq / this.count - m * m));
  }

  /** The q-quantile (0..1), NaN when empty; clamped to the values seen. */
  quantile(q: number): number {
    if (this.count === 0) return NaN;
    if (q >= 1) return this.max;
    const rank = Math.max(1, Math.ceil(q * this.count));
    let seen = 0;
    for (const b of [...this.buckets.keys()].sort((x, y) => x - y)) {
      seen += this.buckets.get(b)!;
      if (seen >= rank) return Math.min(this.max, Math.max(this.min, FLOOR * GROWTH ** (b + 0.5)));
    }
    return this.max;
  }

  toJSON(): LogHistogramData {
    return {
      buckets: Object.fromEntries(this.buckets),
      count: this.count,
      sum: this.sum,
      sumSq: this.sumSq,
      min: this.count === 0 ? null : this.min,
      max: this.count === 0 ? null : this.max,
    };
  }

  static from(data: LogHistogramData): LogHistogram {
    const h = new LogHistogram();
    for (const [b, n] of Object.entries(data.buckets)) h.buckets.set(Number(b), n);
    h.count = data.count;
    h.sum = data.sum;
    h.sumSq = data.sumSq;
    h.min = data.min ?? Infinity;
    h.max = data.max ?? -Infinity;
    return h;
  }
}
