/**
 * `bench replay --report FILE.html`: one self-contained page — inline CSS,
 * inline SVG charts drawn here, a few lines of inline script for a hover
 * read-out, the run's JSON embedded — that opens from disk with no network
 * (its Content-Security-Policy forbids any fetch). Pure: report in, HTML out.
 */

import { ENDPOINT_COLUMNS, endpointRows, latencyColumns, latencyRows, type ReplayReport, runTitle, summaryRows } from "./replay-report.ts";
import { type ChartSeries, escapeHtml, lineChart } from "./svg-chart.ts";

const CSS = `
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1500px}
h1{font-size:18px;margin:0 0 4px}h2{font-size:15px;margin:24px 0 8px}
.meta{color:#555;margin:0 0 16px}.meta code{background:#f3f3f3;padding:1px 4px}
table{border-collapse:collapse;margin:4px 0 12px}th,td{padding:3px 10px;border-bottom:1px solid #e3e3e3;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#fafafa}
.charts{display:flex;flex-wrap:wrap;gap:12px}
svg.chart{max-width:100%;height:auto;background:#fff;border:1px solid #e3e3e3}
svg .title{font-size:13px;font-weight:600}svg .unit{font-weight:400;fill:#666}
svg .tick,svg .axis,svg .legend text{font-size:11px;fill:#555}
svg .grid{stroke:#eee}svg .frame{fill:none;stroke:#ccc}
svg .series{fill:none;stroke-width:1.6}svg .cursor{stroke:#999;stroke-dasharray:3 3}
#tip{position:fixed;pointer-events:none;background:#222;color:#fff;font-size:12px;padding:4px 8px;border-radius:3px;white-space:pre;display:none}
`;

/** Hover read-out: the values of the bucket under the pointer. Data comes from the chart's own attributes. */
const SCRIPT = `
(function () {
  var tip = document.getElementById("tip");
  var charts = document.querySelectorAll("svg.chart");
  charts.forEach(function (svg) {
    var data = JSON.parse(svg.getAttribute("data-values"));
    var left = Number(svg.getAttribute("data-left")), width = Number(svg.getAttribute("data-width"));
    var box = svg.viewBox.baseVal, cursor = svg.querySelector(".cursor");
    svg.addEventListener("mousemove", function (ev) {
      var r = svg.getBoundingClientRect();
      var x = (ev.clientX - r.left) * (box.width / r.width);
      var n = data.x.length, i = Math.floor(((x - left) / width) * n);
      if (i < 0 || i >= n) { tip.style.display = "none"; cursor.setAttribute("visibility", "hidden"); return; }
      var lines = [data.xLabel + " " + data.x[i]];
      data.series.forEach(function (s) { lines.push(s.name + ": " + (s.values[i] === null ? "-" : s.values[i])); });
      tip.textContent = lines.join("\\n");
      tip.style.left = ev.clientX + 12 + "px"; tip.style.top = ev.clientY + 12 + "px"; tip.style.display = "block";
      var cx = left + ((i + 0.5) / n) * width;
      cursor.setAttribute("x1", cx); cursor.setAttribute("x2", cx); cursor.setAttribute("visibility", "visible");
    });
    svg.addEventListener("mouseleave", function () { tip.style.display = "none"; cursor.setAttribute("visibility", "hidden"); });
  });
  document.body.setAttribute("data-charts-ready", String(charts.length));
})();
`;

function table(columns: readonly string[], rows: readonly (readonly string[])[], id: string): string {
  const head = `<tr>${columns.map((c) => `<th>${escapeHtml(c)}</th>`).join("")}</tr>`;
  const body = rows.map((r) => `<tr>${r.map((c) => `<td>${escapeHtml(c)}</td>`).join("")}</tr>`).join("");
  return `<table id="${id}">${head}${body}</table>`;
}

function chart(id: string, title: string, unit: string, r: ReplayReport, series: ChartSeries[]): string {
  const xLabel = "trace time (s)";
  const svg = lineChart({ id, title, unit, x: r.timeline.t_s, xLabel, series });
  // The hover script reads the values back from the element itself (no global data to keep in step).
  const values = escapeHtml(JSON.stringify({ x: r.timeline.t_s, xLabel, series }));
  return svg.replace("<svg ", `<svg data-values="${values}" `);
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
  const json = JSON.stringify(r).replace(/</g, "\\u003c");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(runTitle(r))}</title>
<style>${CSS}</style></head>
<body>
<h1>${escapeHtml(runTitle(r))}</h1>
<p class="meta">${meta}</p>
<h2>Latency</h2>
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
<div id="tip"></div>
<script type="application/json" id="report">${json}</script>
<script>${SCRIPT}</script>
</body></html>
`;
}
