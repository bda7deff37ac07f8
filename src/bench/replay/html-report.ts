/**
 * `bench replay --report FILE.html`: one self-contained page (html-page.ts)
 * with the run's tables and its charts over trace time. Pure: report in,
 * HTML out.
 */

import { htmlChart, htmlPage, htmlTable as table } from "../html-page.ts";
import { ENDPOINT_COLUMNS, endpointRows, latencyColumns, latencyRows, type ReplayReport, runTitle, summaryRows } from "./replay-report.ts";
import { type ChartSeries, escapeHtml } from "./svg-chart.ts";

function chart(id: string, title: string, unit: string, r: ReplayReport, series: ChartSeries[]): string {
  return htmlChart(id, title, unit, r.timeline.t_s, "trace time (s)", series);
}

export function renderReplayHtml(r: ReplayReport): string {
  const t = r.timeline;
  const endpoints = Object.entries(t.endpoint_in_flight).map(([name, values]) => ({ name, values }));
  const charts = [
    chart("arrivals", "Arrival rate", "requests/s of trace time", r, [
      { name: "arrivals", values: t.arrivals_per_s },
      { name: "errors", values: t.errors.map((e) => e / t.bucket_s) },
    ]),
    chart("ttft", "TTFT of the requests arriving", "ms", r, [
      { name: "p50", values: t.ttft_p50_ms },
      { name: "p90", values: t.ttft_p90_ms },
    ]),
    chart("tpot", "TPOT of the requests arriving", "ms", r, [{ name: "p50", values: t.tpot_p50_ms }]),
    chart("in-flight", "Requests in flight", "requests, bucket average", r, [{ name: "all", values: t.in_flight }]),
    chart("endpoints", "In flight per endpoint", "requests, bucket average", r, endpoints),
  ];
  const meta = [
    `trace <code>${escapeHtml(r.trace)}</code> (${escapeHtml(r.trace_format)})`,
    `window ${r.trace_start_s}–${r.trace_start_s + r.trace_duration_s} s at ×${r.speedup}`,
    ...(r.target === "base-url"
      ? [`server <code>${escapeHtml(r.base_url ?? "")}</code>, model <code>${escapeHtml(r.model_id)}</code>`]
      : [
          `${r.engines} sim-engines, flags <code>${escapeHtml((r.engine_args ?? []).join(" "))}</code>`,
          r.gateway_config ? `gateway config <code>${escapeHtml(r.gateway_config)}</code>` : "gateway config: defaults",
        ]),
    `${escapeHtml(r.date)}${r.commit ? `, llmgw ${escapeHtml(r.commit)}` : ""}`,
    `buckets of ${t.bucket_s} s`,
  ].join(" · ");
  const errors =
    r.error_kinds.length === 0
      ? "<p>none</p>"
      : table(
          ["error", "count"],
          r.error_kinds.map((e) => [e.error, String(e.count)]),
          "errors",
        );
  return htmlPage(
    runTitle(r),
    meta,
    `<h2>Latency</h2>
${table(latencyColumns(r), latencyRows(r), "latency")}
<h2>Figures</h2>
${table(["", "value"], summaryRows(r), "figures")}
<h2>Over time</h2>
<div class="charts">
${charts.join("\n")}
</div>
<h2>Per endpoint</h2>
${table(ENDPOINT_COLUMNS, endpointRows(r), "endpoints")}
<h2>Errors</h2>
${errors}
`,
    r,
  );
}
