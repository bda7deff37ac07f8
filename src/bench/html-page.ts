/**
 * The self-contained HTML page the benches write with --report FILE.html:
 * inline CSS, inline SVG charts (svg-chart.ts), a few lines of inline
 * script for a hover read-out, the run's JSON embedded; it opens from disk
 * with no network (its Content-Security-Policy forbids any fetch). Pure.
 */
import { type ChartSeries, escapeHtml, lineChart } from "./replay/svg-chart.ts";

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

/** A table of text cells under a header row. */
export function htmlTable(columns: readonly string[], rows: readonly (readonly string[])[], id: string): string {
  const head = `<tr>${columns.map((c) => `<th>${escapeHtml(c)}</th>`).join("")}</tr>`;
  const body = rows.map((r) => `<tr>${r.map((c) => `<td>${escapeHtml(c)}</td>`).join("")}</tr>`).join("");
  return `<table id="${id}">${head}${body}</table>`;
}

/** A line chart carrying its own values, which the hover script reads back (no global data to keep in step). */
export function htmlChart(id: string, title: string, unit: string, x: readonly number[], xLabel: string, series: ChartSeries[]): string {
  const svg = lineChart({ id, title, unit, x, xLabel, series });
  const values = escapeHtml(JSON.stringify({ x, xLabel, series }));
  return svg.replace("<svg ", `<svg data-values="${values}" `);
}

/** The whole page: `meta` is HTML (escape what goes in it), `body` the sections, `report` embedded as JSON. */
export function htmlPage(title: string, meta: string, body: string, report: unknown): string {
  const json = JSON.stringify(report).replace(/</g, "\\u003c");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>${CSS}</style></head>
<body>
<h1>${escapeHtml(title)}</h1>
<p class="meta">${meta}</p>
${body}<div id="tip"></div>
<script type="application/json" id="report">${json}</script>
<script>${SCRIPT}</script>
</body></html>
`;
}
