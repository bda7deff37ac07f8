/** The q-quantile of a Prometheus histogram from /metrics text, as PromQL's histogram_quantile estimates it. */
import { parsePrometheusText } from "../engines/prom-text.ts";

export function histogramQuantile(metricsText: string, name: string, q: number): number | undefined {
  const buckets = new Map<number, number>();
  for (const s of parsePrometheusText(metricsText).samples) {
    if (s.name !== `${name}_bucket`) continue;
    const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
    buckets.set(le, (buckets.get(le) ?? 0) + s.value);
  }
  const sorted = [...buckets.entries()].sort((a, b) => a[0] - b[0]);
  const total = sorted.at(-1)?.[1] ?? 0;
  if (total === 0) return undefined;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const [le, count] of sorted) {
    if (count >= rank) {
      if (le === Infinity) return prevLe;
      return prevLe + ((le - prevLe) * (rank - prevCount)) / Math.max(1, count - prevCount);
    }
    prevLe = le;
    prevCount = count;
  }
  return prevLe;
}
