/**
 * What a replay measured, from the load process's records, as flat keys in
 * `vllm bench serve`'s names (vllm/benchmarks/serve.py: calculate_metrics
 * and the result dict), then llmgw's own figures under names of their own.
 * Pure: records in, a summary out (the timeline over time is ./timeline.ts).
 *
 * Definitions (vLLM's, vllm/benchmarks/lib/endpoint_request_func.py):
 * - TTFT: send → first chunk carrying a token; E2EL: send → last chunk
 *   carrying a token; both over completed requests.
 * - TPOT: per completed request of more than one token,
 *   (E2EL − TTFT) / (output tokens − 1).
 * - ITL: every gap between consecutive token chunks of every answer.
 * - mean / median / std (population, numpy's) / pN of each, in ms.
 * - Goodput: completed requests with TTFT ≤ the TTFT SLO and TPOT ≤ the
 *   TPOT SLO (a one-token answer has TPOT 0, as vLLM counts it), per second.
 * - Throughputs divide by `duration`: run start → last answer, s.
 */
import { quantile } from "../report.ts";
import { LogHistogram, type LogHistogramData } from "./log-histogram.ts";
import type { RequestRecord } from "./open-loop-driver.ts";

export const LATENCY_METRICS = ["ttft", "tpot", "itl", "e2el"] as const;
type LatencyMetric = (typeof LATENCY_METRICS)[number];
/** vLLM's `--metric-percentiles` default is 99; the replay adds 90, which its figures have always shown. */
export const DEFAULT_METRIC_PERCENTILES: readonly number[] = [90, 99];

/** mean_ttft_ms, median_ttft_ms, std_ttft_ms … for each metric (NaN, null in JSON, when nothing was measured). */
type LatencyStats = { [M in LatencyMetric as `mean_${M}_ms` | `median_${M}_ms` | `std_${M}_ms`]: number };
/** p99_ttft_ms … for each percentile asked: `p${vLLM's p_word}_${metric}_ms`. */
type LatencyPercentiles = { [K in `p${string}_${LatencyMetric}_ms`]?: number };

interface Slo {
  ttftMs: number;
  tpotMs: number;
}

export interface EndpointLoad {
  /** The gateway's endpoint id ("-" for requests it named none for: refused before an endpoint was chosen, or no gateway in front). */
  id: string;
  requests: number;
  errors: number;
  prompt_tokens: number;
  output_tokens: number;
}

export type ReplaySummary = LatencyStats &
  LatencyPercentiles & {
    /** Run start → last answer, s. */
    duration: number;
    completed: number;
    failed: number;
    total_input_tokens: number;
    total_output_tokens: number;
    request_throughput: number;
    request_goodput: number;
    output_throughput: number;
    total_token_throughput: number;
    /** Most requests open at once (a sweep over completed requests' send → E2EL, as vLLM's). */
    max_concurrent_requests: number;

    // llmgw's own figures.
    /** The percentiles the pN_*_ms keys give. */
    metric_percentiles: number[];
    /** Completed answers shorter than max_tokens: an engine that ignored ignore_eos, or a stream cut short. */
    short_answers: number;
    goodput_slo_ttft_ms: number;
    goodput_slo_tpot_ms: number;
    goodput_requests: number;
    /** goodput_requests / every request of the window. */
    goodput_fraction: number;
    goodput_output_throughput: number;
    /** How late the load process sent, ms: the pacing held if these are small against the arrival gaps. */
    arrival_lateness_p50_ms: number;
    arrival_lateness_p99_ms: number;
    arrival_lateness_max_ms: number;
    endpoints: EndpointLoad[];
    /** Failures by kind, most frequent first (vLLM's `errors` is a per-request list; this is a tally). */
    error_kinds: { error: string; count: number }[];
  };

/** vLLM's percentile word: 99 → "99", 99.9 → "99.9". */
export function percentileKey(p: number, metric: LatencyMetric): `p${string}_${LatencyMetric}_ms` {
  return `p${String(p)}_${metric}_ms`;
}

interface Stats {
  mean: number;
  median: number;
  std: number;
  at: (p: number) => number;
}

function listStats(values: readonly number[]): Stats {
  if (values.length === 0) return { mean: NaN, median: NaN, std: NaN, at: () => NaN };
  let sum = 0;
  for (const v of values) sum += v;
  const mean = sum / values.length;
  let sq = 0;
  for (const v of values) sq += (v - mean) ** 2;
  return { mean, median: quantile(values, 0.5), std: Math.sqrt(sq / values.length), at: (p) => quantile(values, p / 100) };
}

function histogramStats(h: LogHistogram): Stats {
  return { mean: h.mean, median: h.quantile(0.5), std: h.std, at: (p) => h.quantile(p / 100) };
}

/** ms to the µs: finer digits are noise, and they make the JSON hard to read. */
function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}

/** TPOT for the goodput test: 0 for a one-token answer, as vLLM's all_tpots. */
function meetsSlo(r: RequestRecord, slo: Slo): boolean {
  if (r.error !== undefined || r.ttftMs === undefined) return false;
  return r.ttftMs <= slo.ttftMs && (r.tpotMs ?? 0) <= slo.tpotMs;
}

/** Peak of requests open at once over half-open [send, end) intervals; an end before a send at the same instant. */
function peakConcurrency(intervals: readonly [number, number][]): number {
  const events: [number, number][] = [];
  for (const [from, to] of intervals) events.push([from, 1], [to, -1]);
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let peak = 0;
  for (const [, d] of events) peak = Math.max(peak, (open += d));
  return peak;
}

/**
 * @param expectedTokens max_tokens of request id (an answer shorter than it is counted in short_answers)
 * @param percentiles the pN keys to give (vLLM's --metric-percentiles)
 */
export function summarize(
  records: readonly RequestRecord[],
  itl: LogHistogramData,
  wallMs: number,
  slo: Slo,
  expectedTokens: (id: number) => number,
  percentiles: readonly number[] = DEFAULT_METRIC_PERCENTILES,
): ReplaySummary {
  // Completed as vLLM counts it: no error, and a token arrived (its TTFT exists).
  const completed = records.filter((r) => r.error === undefined && r.ttftMs !== undefined);
  const good = completed.filter((r) => meetsSlo(r, slo));
  const wallS = wallMs / 1000;
  const perS = (n: number) => (wallS > 0 ? n / wallS : NaN);
  const sumOf = (rs: readonly RequestRecord[], f: (r: RequestRecord) => number) => rs.reduce((s, r) => s + f(r), 0);
  const e2el = (r: RequestRecord) => r.e2elMs ?? r.durationMs;

  const endpoints = new Map<string, EndpointLoad>();
  for (const r of records) {
    const id = r.endpoint ?? "-";
    let e = endpoints.get(id);
    if (!e) endpoints.set(id, (e = { id, requests: 0, errors: 0, prompt_tokens: 0, output_tokens: 0 }));
    e.requests++;
    if (r.error !== undefined) e.errors++;
    e.prompt_tokens += r.promptTokens ?? 0;
    e.output_tokens += r.outputTokens;
  }
  const errors = new Map<string, number>();
  for (const r of records) if (r.error !== undefined) errors.set(errorKind(r.error), (errors.get(errorKind(r.error)) ?? 0) + 1);
  const late = records.filter((r) => !r.error?.startsWith("unsent")).map((r) => r.lateMs);

  const stats: Record<LatencyMetric, Stats> = {
    ttft: listStats(completed.map((r) => r.ttftMs!)),
    tpot: listStats(completed.flatMap((r) => (r.tpotMs === undefined ? [] : [r.tpotMs]))),
    itl: histogramStats(LogHistogram.from(itl)),
    e2el: listStats(completed.map(e2el)),
  };
  const latency: Record<string, number> = {};
  for (const m of LATENCY_METRICS) {
    const s = stats[m];
    latency[`mean_${m}_ms`] = round3(s.mean);
    latency[`median_${m}_ms`] = round3(s.median);
    latency[`std_${m}_ms`] = round3(s.std);
    for (const p of percentiles) latency[percentileKey(p, m)] = round3(s.at(p));
  }
  const input = sumOf(completed, (r) => r.promptTokens ?? 0);
  const output = sumOf(completed, (r) => r.outputTokens);

  return {
    duration: wallS,
    completed: completed.length,
    failed: records.length - completed.length,
    total_input_tokens: input,
    total_output_tokens: output,
    request_throughput: perS(completed.length),
    request_goodput: perS(good.length),
    output_throughput: perS(output),
    total_token_throughput: perS(input + output),
    max_concurrent_requests: peakConcurrency(completed.map((r) => [r.atMs + r.lateMs, r.atMs + r.lateMs + e2el(r)])),
    ...(latency as LatencyStats & LatencyPercentiles),
    metric_percentiles: [...percentiles],
    short_answers: completed.filter((r) => r.outputTokens < expectedTokens(r.id)).length,
    goodput_slo_ttft_ms: slo.ttftMs,
    goodput_slo_tpot_ms: slo.tpotMs,
    goodput_requests: good.length,
    goodput_fraction: records.length > 0 ? good.length / records.length : NaN,
    goodput_output_throughput: perS(sumOf(good, (r) => r.outputTokens)),
    arrival_lateness_p50_ms: quantile(late, 0.5),
    arrival_lateness_p99_ms: quantile(late, 0.99),
    arrival_lateness_max_ms: late.length > 0 ? late.reduce((m, v) => Math.max(m, v), 0) : NaN,
    endpoints: [...endpoints.values()].sort((a, b) => a.id.localeCompare(b.id, "en", { numeric: true })),
    error_kinds: [...errors].map(([error, count]) => ({ error, count })).sort((a, b) => b.count - a.count || a.error.localeCompare(b.error)),
  };
}

/** An error's kind, without the details that differ per request (ports, ids, lengths). */
export function errorKind(error: string): string {
  if (error.startsWith("transport:")) return "transport error";
  return error.replace(/\d{3,}(?= tokens)/g, "N").slice(0, 80);
}
