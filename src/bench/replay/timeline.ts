/**
 * A replay over time, in buckets of trace time (what the report charts):
 * the arrival rate, TTFT and TPOT of the requests arriving in
 * each bucket, and the requests open on average during it, in all and per
 * endpoint. Pure.
 */
import { quantile } from "../report.ts";
import type { RequestRecord } from "./open-loop-driver.ts";

export interface Timeline {
  /** Bucket width, s of trace time. */
  bucket_s: number;
  /** Each bucket's start, s of trace time. */
  t_s: number[];
  /** Requests scheduled per s of trace time. */
  arrivals_per_s: number[];
  /** Of the requests arriving in the bucket and answered (null: none). */
  ttft_p50_ms: (number | null)[];
  ttft_p90_ms: (number | null)[];
  tpot_p50_ms: (number | null)[];
  errors: number[];
  /** Requests open (sent, not ended), averaged over the bucket. */
  in_flight: number[];
  /** The same per endpoint the gateway named. */
  endpoint_in_flight: Record<string, number[]>;
}

interface TimelineClock {
  /** Trace seconds per second of run (speed-up). */
  speedup: number;
  /** Trace time of the run's start, s. */
  startS: number;
  /** Trace time the window covers, s (the timeline reaches at least this far). */
  durationS: number;
}

const NICE_STEPS = [0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600];

/** A readable bucket width giving about `target` buckets over `spanS`. */
export function bucketWidth(spanS: number, target = 120): number {
  const raw = spanS / target;
  return NICE_STEPS.find((s) => s >= raw) ?? NICE_STEPS[NICE_STEPS.length - 1]!;
}

export function timeline(records: readonly RequestRecord[], clock: TimelineClock): Timeline {
  const toTrace = (wallMs: number) => (wallMs * clock.speedup) / 1000;
  let endS = clock.durationS;
  for (const r of records) endS = Math.max(endS, toTrace(r.atMs + r.lateMs + r.durationMs));
  const width = bucketWidth(endS);
  const n = Math.max(1, Math.ceil(endS / width));
  const bucketOf = (s: number) => Math.min(n - 1, Math.max(0, Math.floor(s / width)));

  const arrivals = new Array<number>(n).fill(0);
  const errors = new Array<number>(n).fill(0);
  const ttfts: number[][] = Array.from({ length: n }, () => []);
  const tpots: number[][] = Array.from({ length: n }, () => []);
  const open = new Float64Array(n);
  const byEndpoint = new Map<string, Float64Array>();
  for (const r of records) {
    const b = bucketOf(toTrace(r.atMs));
    arrivals[b]!++;
    if (r.error !== undefined) errors[b]!++;
    else {
      if (r.ttftMs !== undefined) ttfts[b]!.push(r.ttftMs);
      if (r.tpotMs !== undefined) tpots[b]!.push(r.tpotMs);
    }
    if (r.error?.startsWith("unsent")) continue;
    const from = toTrace(r.atMs + r.lateMs);
    const to = toTrace(r.atMs + r.lateMs + r.durationMs);
    addOpen(open, from, to, width);
    if (r.endpoint !== undefined) {
      let e = byEndpoint.get(r.endpoint);
      if (!e) byEndpoint.set(r.endpoint, (e = new Float64Array(n)));
      addOpen(e, from, to, width);
    }
  }
  const q = (xs: number[], p: number) => (xs.length === 0 ? null : quantile(xs, p));
  const ids = [...byEndpoint.keys()].sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
  return {
    bucket_s: width,
    t_s: Array.from({ length: n }, (_, i) => round(clock.startS + i * width)),
    arrivals_per_s: arrivals.map((c) => round(c / width)),
    ttft_p50_ms: ttfts.map((xs) => roundOrNull(q(xs, 0.5))),
    ttft_p90_ms: ttfts.map((xs) => roundOrNull(q(xs, 0.9))),
    tpot_p50_ms: tpots.map((xs) => roundOrNull(q(xs, 0.5))),
    errors,
    in_flight: [...open].map((a) => round(a / width)),
    endpoint_in_flight: Object.fromEntries(ids.map((id) => [id, [...byEndpoint.get(id)!].map((a) => round(a / width))])),
  };
}

/** Add the interval [from, to) (s) to per-bucket areas (request-seconds). */
function addOpen(area: Float64Array, from: number, to: number, width: number): void {
  const last = area.length - 1;
  for (let b = Math.max(0, Math.floor(from / width)); b <= Math.min(last, Math.floor(to / width)); b++) {
    const overlap = Math.min(to, (b + 1) * width) - Math.max(from, b * width);
    if (overlap > 0) area[b] = area[b]! + overlap;
  }
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}

function roundOrNull(x: number | null): number | null {
  return x === null ? null : round(x);
}
