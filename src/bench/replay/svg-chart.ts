/**
 * A line chart as an inline SVG string (no library, nothing fetched): one
 * or more series over a shared x axis, gaps where a value is null, a y axis
 * from 0 to a round maximum, a legend. Pure; the report page embeds it.
 */

export interface ChartSeries {
  name: string;
  values: readonly (number | null)[];
}

interface LineChartOptions {
  /** Used as the element id and data-chart attribute. */
  id: string;
  title: string;
  /** y axis unit, shown beside the title. */
  unit: string;
  /** x of each value (bucket starts). */
  x: readonly number[];
  xLabel: string;
  series: readonly ChartSeries[];
  width?: number;
  height?: number;
}

/** Distinct colours a reader can tell apart (Okabe–Ito, colour-blind safe). */
const PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"];

const M = { left: 56, right: 16, top: 28, bottom: 40 };
const LEGEND_ITEM_W = 72;

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

/** A round number ≥ x (1, 2, 2.5 or 5 × a power of ten). */
function niceCeil(x: number): number {
  if (!(x > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  return ([1, 2, 2.5, 5, 10].find((m) => m * p >= x * (1 - 1e-9)) ?? 10) * p;
}

function fmt(v: number): string {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 10_000) return `${Math.round(v / 1000)}k`;
  if (a >= 100) return String(Math.round(v));
  if (a >= 1) return String(Math.round(v * 10) / 10);
  return String(Math.round(v * 1000) / 1000);
}

export function lineChart(o: LineChartOptions): string {
  const width = o.width ?? 720;
  const height = o.height ?? 240;
  const plotW = width - M.left - M.right;
  const plotH = height - M.top - M.bottom;
  const x0 = o.x[0] ?? 0;
  const step = o.x.length > 1 ? o.x[1]! - o.x[0]! : 1;
  const x1 = (o.x[o.x.length - 1] ?? 0) + step;
  let top = 0;
  for (const s of o.series) for (const v of s.values) if (v !== null && Number.isFinite(v)) top = Math.max(top, v);
  // Round ticks: about four steps of 1, 2, 2.5 or 5 × a power of ten.
  const yStep = niceCeil(top / 4);
  const yMax = Math.max(yStep, Math.ceil(top / yStep - 1e-9) * yStep);
  const xStep = niceCeil((x1 - x0) / 6);
  // A point sits in the middle of its bucket.
  const px = (i: number) => M.left + (((o.x[i] ?? x0) + step / 2 - x0) / (x1 - x0 || 1)) * plotW;
  const py = (v: number) => M.top + plotH - (v / yMax) * plotH;

  const parts: string[] = [];
  parts.push(`<text class="title" x="${M.left}" y="16">${escapeHtml(o.title)} <tspan class="unit">(${escapeHtml(o.unit)})</tspan></text>`);
  for (let v = 0; v <= yMax + yStep / 2; v += yStep) {
    const y = py(v).toFixed(1);
    parts.push(
      `<line class="grid" x1="${M.left}" x2="${M.left + plotW}" y1="${y}" y2="${y}"/><text class="tick" x="${M.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${fmt(v)}</text>`,
    );
  }
  for (let xv = Math.ceil(x0 / xStep) * xStep; xv <= x1 + 1e-9; xv += xStep) {
    const x = (M.left + ((xv - x0) / (x1 - x0 || 1)) * plotW).toFixed(1);
    parts.push(`<text class="tick" x="${x}" y="${M.top + plotH + 16}" text-anchor="middle">${fmt(xv)}</text>`);
  }
  parts.push(`<text class="axis" x="${M.left + plotW / 2}" y="${height - 6}" text-anchor="middle">${escapeHtml(o.xLabel)}</text>`);
  parts.push(`<rect class="frame" x="${M.left}" y="${M.top}" width="${plotW}" height="${plotH}"/>`);
  const has = (v: number | null | undefined): v is number => v !== null && v !== undefined && Number.isFinite(v);
  o.series.forEach((s, si) => {
    const colour = PALETTE[si % PALETTE.length]!;
    let d = "";
    const dots: string[] = [];
    s.values.forEach((v, i) => {
      if (!has(v)) return;
      const x = px(i).toFixed(1);
      const y = py(v).toFixed(1);
      d += `${has(s.values[i - 1]) ? "L" : "M"}${x},${y}`;
      // A value with no neighbour draws no line: mark it (bursty arrivals leave buckets empty).
      if (!has(s.values[i - 1]) && !has(s.values[i + 1])) dots.push(`<circle class="point" cx="${x}" cy="${y}" r="2.5" fill="${colour}"/>`);
    });
    parts.push(`<path class="series" data-series="${escapeHtml(s.name)}" d="${d}" stroke="${colour}"/>${dots.join("")}`);
    // Legend right-aligned on the title's line, clear of the plot.
    const lx = width - M.right - (o.series.length - si) * LEGEND_ITEM_W;
    parts.push(`<g class="legend"><rect x="${lx}" y="7" width="10" height="10" fill="${colour}"/><text x="${lx + 14}" y="16">${escapeHtml(s.name)}</text></g>`);
  });
  parts.push(`<line class="cursor" x1="0" x2="0" y1="${M.top}" y2="${M.top + plotH}" visibility="hidden"/>`);
  return `<svg class="chart" id="${escapeHtml(o.id)}" data-chart="${escapeHtml(o.id)}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${escapeHtml(o.title)}" data-left="${M.left}" data-width="${plotW}">${parts.join("")}</svg>`;
}
