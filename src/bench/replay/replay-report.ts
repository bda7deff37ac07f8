/**
 * The report of one `llmgw bench replay` run: its JSON shape (what --json
 * prints and the HTML page embeds) and its text tables.
 */

import type { TwinFleetReport } from "../../twin/twin-fleet-manager.ts";
import { type EngineClockReport, engineClockCell, engineClocksLine } from "../engine-clock-report.ts";
import { formatNumber, formatTable } from "../report.ts";
import { formatTwinFailures, formatTwinFleet, type TwinFailures } from "../twin-faults.ts";
import { type EndpointLoad, LATENCY_METRICS, percentileKey, type ReplaySummary } from "./summary.ts";
import type { Timeline } from "./timeline.ts";

/** The run's settings, flat beside the figures (vLLM's names where it has one: date, model_id, num_prompts). */
interface ReplayRun {
  scenario: "replay";
  /** "llmgw": sim-engines behind an llmgw gateway the bench started; "twin": the same in the fleet twin, on a virtual clock; "base-url": a server it was pointed at (nothing started). */
  target: "llmgw" | "twin" | "base-url";
  /** The server measured, with --base-url. */
  base_url?: string;
  /** The model every request named. */
  model_id: string;
  /** Requests of the trace in the window (every one of them is completed or failed). */
  num_prompts: number;
  /** Shipped trace name or file path. */
  trace: string;
  trace_format: string;
  trace_start_s: number;
  trace_duration_s: number;
  speedup: number;
  /** The window's own prefix sharing: the hit rate one engine with an unbounded cache would see (traces with block ids). */
  trace_prefix_share?: number;
  /** Sim-engines started (llmgw target only). */
  engines?: number;
  /** The flags every sim-engine got (the bench's, then --engine-args). */
  engine_args?: string[];
  gateway_config?: string;
  /** ISO 8601 date of the run, and the llmgw commit when it runs from a git checkout. */
  date: string;
  commit?: string;
  /** CPU the load process used, s, and as a share of one core over the run. */
  load_process_cpu_s: number;
  load_process_cpu_share: number;
  /** Whether the sim-engines kept their own clock through the replay (the llmgw target: engines the bench started). */
  engine_clock?: EngineClockReport;
  /** Twin runs with --fault: what the faults did and what the gateway did about them. */
  failures?: TwinFailures;
  /** Twin runs with --fleet: the replicas the fleet manager placed, their GPU-hours and its actions. */
  fleet?: TwinFleetReport;
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

export type ReplayReport = Omit<ReplaySummary, "endpoints"> &
  ReplayRun & {
    endpoints: EndpointReport[];
    timeline: Timeline;
  };

function ms(n: number): string {
  return Number.isFinite(n) ? formatNumber(Math.round(n * 10) / 10) : "-";
}

export function runTitle(r: ReplayReport): string {
  const end = r.trace_start_s + r.trace_duration_s;
  const target =
    r.target === "base-url"
      ? `${r.base_url} (${r.model_id})`
      : `${r.engines} sim-engines behind llmgw${r.target === "twin" ? ", in the fleet twin (virtual clock; times simulated)" : ""}`;
  return `llmgw bench replay — ${r.trace}, trace ${formatNumber(r.trace_start_s)}–${formatNumber(end)} s at ×${formatNumber(r.speedup)}: ${r.num_prompts} requests, ${target}`;
}

/** Figure rows shared by the text and HTML reports; each names the JSON key it shows. */
export function summaryRows(r: ReplayReport): [string, string][] {
  const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(1)} %` : "-");
  const rows: [string, string][] = [
    ["completed / failed (of num_prompts)", `${r.completed} / ${r.failed} (of ${r.num_prompts})`],
    ["short_answers (shorter than max_tokens)", String(r.short_answers)],
    ["request_throughput (req/s)", formatNumber(r.request_throughput)],
    ["output_throughput / total_token_throughput (tok/s)", `${formatNumber(r.output_throughput)} / ${formatNumber(r.total_token_throughput)}`],
    ["total_input_tokens / total_output_tokens", `${r.total_input_tokens} / ${r.total_output_tokens}`],
    ["max_concurrent_requests", String(r.max_concurrent_requests)],
    [`goodput_requests (TTFT ≤ ${r.goodput_slo_ttft_ms} ms and TPOT ≤ ${r.goodput_slo_tpot_ms} ms)`, `${r.goodput_requests} (${pct(r.goodput_fraction)})`],
    ["request_goodput (req/s) / goodput_output_throughput (tok/s)", `${formatNumber(r.request_goodput)} / ${formatNumber(r.goodput_output_throughput)}`],
  ];
  if (r.target === "llmgw")
    rows.push(["prefix-cache hits: engines / the trace's own sharing", `${pct(engineHitRate(r))} / ${pct(r.trace_prefix_share ?? NaN)}`]);
  rows.push(
    ["arrival_lateness p50 / p99 / max (ms)", `${ms(r.arrival_lateness_p50_ms)} / ${ms(r.arrival_lateness_p99_ms)} / ${ms(r.arrival_lateness_max_ms)}`],
    ["load_process_cpu (s, share of a core)", `${formatNumber(Math.round(r.load_process_cpu_s * 10) / 10)}, ${pct(r.load_process_cpu_share)}`],
    ["duration (s)", formatNumber(Math.round(r.duration * 10) / 10)],
  );
  if (r.engine_clock && r.engine_clock.engines > 0)
    rows.push([
      r.engine_clock.kept ? "engine_clock: kept (timer p99 late ms / schedule slipped)" : "engine_clock: FELL BEHIND (timer p99 late ms / schedule slipped)",
      engineClockCell(r.engine_clock),
    ]);
  return rows;
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
/** The latency table's columns: the statistic part of the JSON keys (mean_ttft_ms, median_ttft_ms, std_ttft_ms, p99_ttft_ms …). */
export function latencyColumns(r: ReplayReport): string[] {
  return ["latency (ms)", "mean", "median", "std", ...r.metric_percentiles.map((p) => `p${String(p)}`)];
}

/** One row per metric, labelled with the metric part of its JSON keys, upper-cased: TTFT ↔ *_ttft_ms, TPOT ↔ *_tpot_ms … */
export function latencyRows(r: ReplayReport): string[][] {
  return LATENCY_METRICS.map((m) => [
    m.toUpperCase(),
    ms(r[`mean_${m}_ms`]),
    ms(r[`median_${m}_ms`]),
    ms(r[`std_${m}_ms`]),
    ...r.metric_percentiles.map((p) => ms(r[percentileKey(p, m)] ?? NaN)),
  ]);
}

export function formatReplayText(r: ReplayReport): string {
  const out = [
    formatTable({ title: runTitle(r), columns: latencyColumns(r), rows: latencyRows(r) }),
    "",
    formatTable({ title: "figures", columns: ["", "value"], rows: summaryRows(r) }),
    "",
    formatTable({
      title:
        r.target === "llmgw"
          ? "endpoints (gateway's x-llmgw-endpoint; prefix-cache hits from the engine's own counters)"
          : "endpoints (x-llmgw-endpoint when the server is an llmgw gateway, else -)",
      columns: ENDPOINT_COLUMNS,
      rows: endpointRows(r),
    }),
  ];
  if (r.error_kinds.length > 0)
    out.push("", formatTable({ title: "error_kinds", columns: ["error", "count"], rows: r.error_kinds.map((e) => [e.error, e.count]) }));
  if (r.failures) out.push("", formatTwinFailures([{ name: "replay", failures: r.failures }]));
  if (r.fleet) out.push("", formatTwinFleet(r.fleet));
  const clocks = engineClocksLine([{ name: "replay", clock: r.engine_clock }]);
  if (clocks) out.push("", clocks);
  return out.join("\n");
}
