/** Shared output of every bench scenario: a text table for people, one JSON object with --json. */

export interface Table {
  title: string;
  columns: string[];
  rows: (string | number)[][];
}

export function formatTable(t: Table): string {
  const cells = [t.columns, ...t.rows.map((r) => r.map((c) => (typeof c === "number" ? formatNumber(c) : c)))];
  const widths = t.columns.map((_, i) => Math.max(...cells.map((r) => String(r[i] ?? "").length)));
  const line = (r: (string | number)[]) => r.map((c, i) => String(c).padStart(widths[i]!)).join("  ");
  return [t.title, line(cells[0]!), widths.map((w) => "-".repeat(w)).join("  "), ...cells.slice(1).map(line)].join("\n");
}

export function formatNumber(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  if (Number.isInteger(n)) return String(n);
  const abs = Math.abs(n);
  return n.toFixed(abs >= 100 ? 1 : abs >= 1 ? 2 : 3);
}

/** The q-quantile (0..1) of `values` by linear interpolation; NaN when empty. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}
