/**
 * Rates from two dashboard snapshots (plain JavaScript: the page loads it as
 * is, the unit tests import it): requests per second, the share of errors,
 * and TTFT quantiles from the difference of two cumulative histograms, the
 * way Prometheus' rate() and histogram_quantile() read them. null where
 * there is nothing to compute from (no traffic in the window, a counter that
 * went backwards because the gateway restarted).
 */

/** The oldest snapshot at most `windowMs` older than the newest, and the newest; null with fewer than two. */
export function windowEnds(samples, windowMs) {
  if (samples.length < 2) return null;
  const last = samples[samples.length - 1];
  const first = samples.find((s) => last.at - s.at <= windowMs) ?? samples[0];
  return first === last ? null : { first, last };
}

function deltas(a, b) {
  const dt = (b.at - a.at) / 1000;
  const requests = b.traffic.requests - a.traffic.requests;
  const errors = b.traffic.errors - a.traffic.errors;
  if (dt <= 0 || requests < 0 || errors < 0) return null;
  return { dt, requests, errors };
}

/** Requests finished per second between two snapshots. */
export function requestRate(a, b) {
  const d = deltas(a, b);
  return d ? d.requests / d.dt : null;
}

/** Failed share of the requests finished between two snapshots; null when none finished. */
export function errorRatio(a, b) {
  const d = deltas(a, b);
  return d && d.requests > 0 ? d.errors / d.requests : null;
}

/**
 * The q-quantile of TTFT between two snapshots: linear interpolation inside
 * the bucket that holds it (from 0 for the first bucket); in the +Inf bucket,
 * the highest finite bound, as histogram_quantile answers.
 */
export function ttftQuantile(a, b, q) {
  const count = b.traffic.ttft.count - a.traffic.ttft.count;
  if (!(count > 0)) return null;
  const before = new Map(a.traffic.ttft.buckets.map((x) => [x.le, x.count]));
  const buckets = b.traffic.ttft.buckets.map((x) => ({ le: x.le, count: x.count - (before.get(x.le) ?? 0) }));
  if (buckets.some((x) => x.count < 0)) return null;
  const rank = q * count;
  let lower = 0;
  let below = 0;
  for (const x of buckets) {
    if (x.count >= rank) {
      const inBucket = x.count - below;
      return inBucket > 0 ? lower + (x.le - lower) * ((rank - below) / inBucket) : x.le;
    }
    lower = x.le;
    below = x.count;
  }
  return buckets.length > 0 ? buckets[buckets.length - 1].le : null;
}
