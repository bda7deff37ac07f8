/**
 * Rates from two dashboard snapshots (plain JavaScript: the page loads it as
 * is, the unit tests import it): requests and output tokens per second, the
 * share of errors, and TTFT (or time to headers) quantiles from the
 * difference of two cumulative histograms, the way Prometheus' rate() and
 * histogram_quantile() read them. null where there is nothing to compute
 * from (no traffic in the window, a counter that went backwards because the
 * gateway restarted).
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

/** Output tokens per second between two snapshots (as the engines reported them). */
export function tokenRate(a, b) {
  const dt = (b.at - a.at) / 1000;
  const tokens = b.traffic.completion_tokens - a.traffic.completion_tokens;
  return dt > 0 && tokens >= 0 ? tokens / dt : null;
}

/**
 * The q-quantile of what a cumulative histogram counted between two
 * snapshots: linear interpolation inside the bucket that holds it (from 0
 * for the first bucket); in the +Inf bucket, the highest finite bound, as
 * histogram_quantile answers.
 */
function histogramQuantile(ha, hb, q) {
  const count = hb.count - ha.count;
  if (!(count > 0)) return null;
  const before = new Map(ha.buckets.map((x) => [x.le, x.count]));
  const buckets = hb.buckets.map((x) => ({ le: x.le, count: x.count - (before.get(x.le) ?? 0) }));
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

/** The q-quantile of TTFT (streamed requests) between two snapshots. */
export function ttftQuantile(a, b, q) {
  return histogramQuantile(a.traffic.ttft, b.traffic.ttft, q);
}

/**
 * How soon clients got something, for the TTFT figure: the TTFT of the
 * streams finished in the window; with none, the time to headers of the
 * non-streamed requests (their answer comes whole: headers are the first
 * thing they see), marked as such; null with neither.
 */
export function firstResponseQuantile(a, b, q) {
  const ttft = ttftQuantile(a, b, q);
  if (ttft !== null) return { value: ttft, kind: "ttft" };
  const headers = a.traffic.time_to_headers && b.traffic.time_to_headers ? histogramQuantile(a.traffic.time_to_headers, b.traffic.time_to_headers, q) : null;
  return headers === null ? null : { value: headers, kind: "headers" };
}
