/**
 * The report of one `llmgw bench replay` run: its JSON shape (what --json
 * prints and the HTML page embeds) and its text tables.
 */
import { formatNumber, formatTable } from "../report.ts";
import type { EndpointLoad, Percentiles, ReplaySummary } from "./summary.ts";
import type { Timeline } from "./timeline.ts";

interface ReplayRun {
  /** Shipped trace name or file path. */
  trace: string;
  format: string;
  start_s: number;
  duration_s: number;
  speedup: number;
  /** Requests of the trace in the window (all of them are accounted for in `requests`). */
  requests_in_window: number;
  /** The window's own prefix sharing: the hit rate one engine with an unbounded cache would see (traces with block ids). */
  trace_prefix_share?: number;
  engines: number;
  /** The flags every sim-engine got (the bench's, then --engine-args). */
  engine_args: string[];
  gateway_config?: string;
  /** ISO date of the run, and the llmgw commit when it runs from a git checkout. */
  date: string;
  commit?: string;
}

/** An engine's own counters over the run. */
interface EngineLoad {
  requests?: number;
  prompt_tokens?: number;
  generation_tokens?: number;
  /** Prompt tokens found in the prefix cache. */
  prefix_cache_hit_tokens?: number;
  /** Those / prompt tokens looked up. */
  prefix_cache_hit_rate?: number;
}

export interface EndpointReport extends EndpointLoad {
  engine?: EngineLoad;
}

export interface ReplayReport extends Omit<ReplaySummary, "endpoints"> {
  scenario: "replay";
  run: ReplayRun;
  /** CPU the load process used, s, and as a share of one core over the run. */
  load_process: { cpu_s: number; cpu_share: number };
  endpoints: EndpointReport[];
  timeline: Timeline;
}

function ms(n: number): string {
  return Number.isFinite(n) ? formatNumber(Math.round(n * 10) / 10) : "-";
}

function percentileRow(name: string, p: Percentiles): string[] {
  return [name, ms(p.p50), ms(p.p90), ms(p.p99), ms(p.mean)];
}

export function runTitle(r: ReplayReport): string {
  const end = r.run.start_s + r.run.duration_s;
  return `llmgw bench replay — ${r.run.trace}, trace ${formatNumber(r.run.start_s)}–${formatNumber(end)} s at ×${formatNumber(r.run.speedup)}: ${r.run.requests_in_window} requests, ${r.run.engines} sim-engines behind llmgw`;
}

/** Figure rows shared by the text and HTML reports. */
export function summaryRows(r: ReplayReport): [string, string][] {
  const g = r.goodput;
  const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(1)} %` : "-");
  return [
    ["requests: total / answered / errors", `${r.requests.total} / ${r.requests.answered} / ${r.requests.errors}`],
    ["answers shorter than max_tokens", String(r.requests.short_answers)],
    [
      "throughput: req/s, output tok/s, prompt tok/s",
      `${formatNumber(r.throughput.requests_per_s)}, ${formatNumber(r.throughput.output_tokens_per_s)}, ${formatNumber(r.throughput.prompt_tokens_per_s)}`,
    ],
    [`goodput (TTFT ≤ ${g.slo_ttft_ms} ms and ITL ≤ ${g.slo_itl_ms} ms): requests`, `${g.requests} (${pct(g.fraction)})`],
    ["goodput: req/s, output tok/s", `${formatNumber(g.requests_per_s)}, ${formatNumber(g.output_tokens_per_s)}`],
    ["prefix-cache hits: engines / the trace's own sharing", `${pct(engineHitRate(r))} / ${pct(r.run.trace_prefix_share ?? NaN)}`],
    ["arrival lateness p50 / p99 / max (ms)", `${ms(r.arrival_lateness_ms.p50)} / ${ms(r.arrival_lateness_ms.p99)} / ${ms(r.arrival_lateness_ms.max)}`],
    ["load process CPU (s, share of a core)", `${formatNumber(Math.round(r.load_process.cpu_s * 10) / 10)}, ${pct(r.load_process.cpu_share)}`],
    ["run (s)", formatNumber(Math.round(r.wall_s * 10) / 10)],
  ];
}

/** Prompt tokens the engines found in their prefix caches / prompt tokens, over all engines; NaN when none reported. */
function engineHitRate(r: ReplayReport): number {
  let hits = 0;
  let tokens = 0;
  for (const e of r.endpoints) {
    if (e.engine?.prefix_cache_hit_tokens === undefined || e.engine.prompt_tokens === undefined) continue;
    hits += e.engine.prefix_cache_hit_tokens;
    tokens += e.engine.prompt_tokens;
  }
  return tokens > 0 ? hits / tokens : NaN;
}

export function endpointRows(r: ReplayReport): string[][] {
  const pct = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? "-" : `${(x * 100).toFixed(1)} %`);
  return r.endpoints.map((e) => [
    e.id,
    String(e.requests),
    String(e.errors),
    String(e.prompt_tokens),
    String(e.output_tokens),
    pct(e.engine?.prefix_cache_hit_rate),
  ]);
}

export const ENDPOINT_COLUMNS = ["endpoint", "requests", "errors", "prompt tokens", "output tokens", "prefix-cache hits"];
export const LATENCY_COLUMNS = ["latency (ms)", "p50", "p90", "p99", "mean"];

export function latencyRows(r: ReplayReport): string[][] {
  return [
    percentileRow("TTFT", r.ttft_ms),
    percentileRow("ITL (every gap)", r.itl_ms),
    percentileRow("ITL (per-request mean)", r.tpot_ms),
    percentileRow("E2E", r.e2e_ms),
  ];
}

export function formatReplayText(r: ReplayReport): string {
  const out = [
    formatTable({ title: runTitle(r), columns: LATENCY_COLUMNS, rows: latencyRows(r) }),
    "",
    formatTable({ title: "figures", columns: ["", "value"], rows: summaryRows(r) }),
    "",
    formatTable({
      title: "per endpoint (gateway's x-llmgw-endpoint; prefix-cache hits from the engine's own counters)",
      columns: ENDPOINT_COLUMNS,
      rows: endpointRows(r),
    }),
  ];
  if (r.errors.length > 0) out.push("", formatTable({ title: "errors", columns: ["error", "count"], rows: r.errors.map((e) => [e.error, e.count]) }));
  return out.join("\n");
}
