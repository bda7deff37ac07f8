/** Prometheus histograms read back from scraped samples, summed over their series. */
import type { Sample } from "../engines/prom-text.ts";

/** Cumulative counts by upper bound (`le`, +Inf as Infinity) of `name`'s histogram, summed over its series. */
export function histogramBuckets(samples: readonly Sample[], name: string): Map<number, number> {
  const buckets = new Map<number, number>();
  for (const s of samples) {
    if (s.name !== `${name}_bucket`) continue;
    const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
    buckets.set(le, (buckets.get(le) ?? 0) + s.value);
  }
  return buckets;
}

/** The q-quantile of cumulative buckets, interpolated inside the bucket (as PromQL's histogram_quantile does); NaN when empty. */
export function bucketQuantile(buckets: ReadonlyMap<number, number>, q: number): number {
  const les = [...buckets.keys()].sort((a, b) => a - b);
  const total = buckets.get(Infinity) ?? 0;
  if (total === 0) return NaN;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const le of les) {
    const count = buckets.get(le)!;
    if (count >= rank) return le === Infinity ? prevLe : prevLe + ((le - prevLe) * (rank - prevCount)) / Math.max(1, count - prevCount);
    prevLe = le;
    prevCount = count;
  }
  return prevLe;
}

/** The q-quantile of `name`'s histogram summed over its series. */
export function histogramQuantile(samples: readonly Sample[], name: string, q: number): number {
  return bucketQuantile(histogramBuckets(samples, name), q);
}
