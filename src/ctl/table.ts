/** Aligned text tables for `llmgw ctl`, with colour only when the output is a terminal (and NO_COLOR is unset). */

export type Tint = "green" | "red" | "yellow" | "dim" | "bold";

const CODES: Record<Tint, [number, number]> = { green: [32, 39], red: [31, 39], yellow: [33, 39], dim: [2, 22], bold: [1, 22] };

/** A cell: text, and the colour it gets on a terminal. */
export interface Cell {
  text: string;
  tint?: Tint;
}

export type CellInput = string | number | Cell;

function cell(c: CellInput): Cell {
  return typeof c === "object" ? c : { text: String(c) };
}

export function paint(text: string, tint: Tint | undefined, colour: boolean): string {
  if (!colour || tint === undefined) return text;
  const [on, off] = CODES[tint];
  return `\u001b[${on}m${text}\u001b[${off}m`;
}

/** Columns padded to the widest cell (colour codes do not count), two spaces apart, no trailing blanks. */
export function renderTable(columns: readonly string[], rows: readonly (readonly CellInput[])[], colour: boolean): string {
  const all = [columns.map((c) => ({ text: c, tint: "bold" as const })), ...rows.map((r) => r.map(cell))];
  const widths = columns.map((_, i) => Math.max(...all.map((r) => r[i]?.text.length ?? 0)));
  return all
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? paint(c.text, c.tint, colour) : paint(c.text, c.tint, colour) + " ".repeat(widths[i]! - c.text.length)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/** Whether to colour: a terminal, and NO_COLOR (no-color.org) unset. */
export function useColour(isTty: boolean, env: Record<string, string | undefined>): boolean {
  return isTty && (env.NO_COLOR === undefined || env.NO_COLOR === "");
}

/** "3.2 s ago", "-" when never. */
export function age(ms: number | null): string {
  if (ms === null) return "-";
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s ago` : `${Math.round(ms / 1000)} s ago`;
}

export function dash(v: string | number | null | undefined): string {
  return v === null || v === undefined || v === "" ? "-" : String(v);
}
