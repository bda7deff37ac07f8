/** Shared output of every bench scenario: a text table for people, one JSON object with --json. */
import { renderTable } from "../shared/text-table.ts";

interface Table {
  title: string;
  columns: string[];
  rows: (string | number)[][];
}

/** A bench table: numbers formatted, right-aligned under a title and a rule. */
export function formatTable(t: Table): string {
  const rows = t.rows.map((r) => r.map((c) => (typeof c === "number" ? formatNumber(c) : c)));
  return renderTable(t.columns, rows, { align: "right", title: t.title, rule: true });
}

/** A relative change as a signed percentage: "+4.2 %", "-0.3 %". */
export function signedPercent(x: number): string {
  return `${x >= 0 ? "+" : ""}${(x * 100).toFixed(1)} %`;
}

/** An error against a published figure, typeset: "+4.2 %", "−0.3 %" (a true minus sign); "-" where there is none. */
export function signedError(x: number): string {
  return Number.isFinite(x) ? `${x >= 0 ? "+" : "−"}${Math.abs(x * 100).toFixed(1)} %` : "-";
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
