/**
 * What a replay measured, from the load process's records: latency
 * percentiles, goodput under an SLO, how late the sends were, the load each
 * endpoint took and the errors by kind. Pure: records in, a summary out
 * (the timeline over time is ./timeline.ts).
 *
 * Definitions (those of vLLM's benchmark_serving):
 * - TTFT: send → first chunk carrying a token; E2E: send → end of the answer;
 *   both over answered requests.
 * - ITL: every gap between consecutive token chunks of every answer.
 * - A request meets the SLO when it was answered, its TTFT ≤ slo_ttft_ms and
 *   its mean inter-token latency ((last token − first) / (tokens − 1), vLLM's
 *   TPOT) ≤ slo_itl_ms; a one-token answer has no ITL and meets that half.
 *   Goodput: those requests, and their output tokens, per second of the run.
 */
import { quantile } from "../report.ts";
import { LogHistogram, type LogHistogramData } from "./log-histogram.ts";
import type { RequestRecord } from "./open-loop-driver.ts";

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  mean: number;
}

interface Slo {
  ttftMs: number;
  itlMs: number;
}

export interface EndpointLoad {
  /** The gateway's endpoint id ("-" for requests it named none for: refused before an endpoint was chosen). */
  id: string;
  requests: number;
  errors: number;
  prompt_tokens: number;
  output_tokens: number;
}

export interface ReplaySummary {
  requests: { total: number; answered: number; errors: number; short_answers: number };
  ttft_ms: Percentiles;
  itl_ms: Percentiles;
  e2e_ms: Percentiles;
  /** Per-request mean inter-token latency (what the ITL SLO applies to). */
  tpot_ms: Percentiles;
  throughput: { requests_per_s: number; output_tokens_per_s: number; prompt_tokens_per_s: number };
  goodput: { slo_ttft_ms: number; slo_itl_ms: number; requests: number; fraction: number; requests_per_s: number; output_tokens_per_s: number };
  /** How late the load process sent, ms: the pacing held if these are small against the arrival gaps. */
  arrival_lateness_ms: { p50: number; p99: number; max: number };
  endpoints: EndpointLoad[];
  /** Failures by kind, most frequent first. */
  errors: { error: string; count: number }[];
  /** Run start → last answer, s. */
  wall_s: number;
}

function percentiles(values: readonly number[]): Percentiles {
  if (values.length === 0) return { p50: NaN, p90: NaN, p99: NaN, mean: NaN };
  let sum = 0;
  for (const v of values) sum += v;
  return { p50: round3(quantile(values, 0.5)), p90: round3(quantile(values, 0.9)), p99: round3(quantile(values, 0.99)), mean: round3(sum / values.length) };
}

function histogramPercentiles(h: LogHistogram): Percentiles {
  return { p50: round3(h.quantile(0.5)), p90: round3(h.quantile(0.9)), p99: round3(h.quantile(0.99)), mean: round3(h.mean) };
}

/** ms to the µs: finer digits are noise, and they make the JSON hard to read. */
function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}

/** Whether an answered request met the SLO. */
function meetsSlo(r: RequestRecord, slo: Slo): boolean {
  if (r.error !== undefined || r.ttftMs === undefined) return false;
  return r.ttftMs <= slo.ttftMs && (r.itlMeanMs === undefined || r.itlMeanMs <= slo.itlMs);
}

/**
 * @param expectedTokens max_tokens of request id (an answer shorter than it is counted in short_answers:
 *   an engine that ignored ignore_eos, or a stream cut short)
 */
export function summarize(
  records: readonly RequestRecord[],
  itl: LogHistogramData,
  wallMs: number,
  slo: Slo,
  expectedTokens: (id: number) => number,
): ReplaySummary {
  const answered = records.filter((r) => r.error === undefined);
  const good = answered.filter((r) => meetsSlo(r, slo));
  const wallS = wallMs / 1000;
  const perS = (n: number) => (wallS > 0 ? n / wallS : NaN);
  const sumOf = (rs: readonly RequestRecord[], f: (r: RequestRecord) => number) => rs.reduce((s, r) => s + f(r), 0);

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

  return {
    requests: {
      total: records.length,
      answered: answered.length,
      errors: records.length - answered.length,
      short_answers: answered.filter((r) => r.outputTokens < expectedTokens(r.id)).length,
    },
    ttft_ms: percentiles(answered.map((r) => r.ttftMs!)),
    itl_ms: histogramPercentiles(LogHistogram.from(itl)),
    e2e_ms: percentiles(answered.map((r) => r.durationMs)),
    tpot_ms: percentiles(answered.flatMap((r) => (r.itlMeanMs === undefined ? [] : [r.itlMeanMs]))),
    throughput: {
      requests_per_s: perS(answered.length),
      output_tokens_per_s: perS(sumOf(answered, (r) => r.outputTokens)),
      prompt_tokens_per_s: perS(sumOf(answered, (r) => r.promptTokens ?? 0)),
    },
    goodput: {
      slo_ttft_ms: slo.ttftMs,
      slo_itl_ms: slo.itlMs,
      requests: good.length,
      fraction: records.length > 0 ? good.length / records.length : NaN,
      requests_per_s: perS(good.length),
      output_tokens_per_s: perS(sumOf(good, (r) => r.outputTokens)),
    },
    arrival_lateness_ms: { p50: quantile(late, 0.5), p99: quantile(late, 0.99), max: late.length > 0 ? late.reduce((m, v) => Math.max(m, v), 0) : NaN },
    endpoints: [...endpoints.values()].sort((a, b) => a.id.localeCompare(b.id, "en", { numeric: true })),
    errors: [...errors].map(([error, count]) => ({ error, count })).sort((a, b) => b.count - a.count || a.error.localeCompare(b.error)),
    wall_s: wallS,
  };
}

/** An error's kind, without the details that differ per request (ports, ids, lengths). */
export function errorKind(error: string): string {
  if (error.startsWith("transport:")) return "transport error";
  return error.replace(/\d{3,}(?= tokens)/g, "N").slice(0, 80);
}
