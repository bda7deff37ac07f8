/** Aligned text tables for every command that prints one (`llmgw ctl`, `bench`, `agent --inventory`), with colour only when asked for (a terminal, NO_COLOR unset). */

type Tint = "green" | "red" | "yellow" | "dim" | "bold";

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

function paint(text: string, tint: Tint | undefined, colour: boolean): string {
  if (!colour || tint === undefined) return text;
  const [on, off] = CODES[tint];
  return `\u001b[${on}m${text}\u001b[${off}m`;
}

/** How a table is laid out: cells padded on the right (left-aligned, the default) or on the left; an optional title line and a rule under the header. */
interface TableStyle {
  colour?: boolean;
  align?: "left" | "right";
  title?: string;
  rule?: boolean;
}

/** Columns padded to the widest cell (colour codes do not count), two spaces apart, no trailing blanks. */
export function renderTable(columns: readonly string[], rows: readonly (readonly CellInput[])[], style: TableStyle = {}): string {
  const colour = style.colour === true;
  const all = [columns.map((c) => ({ text: c, tint: "bold" as const })), ...rows.map((r) => r.map(cell))];
  const widths = columns.map((_, i) => Math.max(...all.map((r) => r[i]?.text.length ?? 0)));
  const pad = (c: Cell, i: number, last: boolean): string => {
    const fill = " ".repeat(widths[i]! - c.text.length);
    const text = paint(c.text, c.tint, colour);
    return style.align === "right" ? fill + text : last ? text : text + fill;
  };
  const lines = all.map((r) =>
    r
      .map((c, i) => pad(c, i, i === r.length - 1))
      .join("  ")
      .trimEnd(),
  );
  if (style.rule === true) lines.splice(1, 0, widths.map((w) => "-".repeat(w)).join("  "));
  if (style.title !== undefined) lines.unshift(style.title);
  return lines.join("\n");
}

/** Whether to colour: a terminal, and NO_COLOR (no-color.org) unset. */
export function useColour(isTty: boolean, env: Record<string, string | undefined>): boolean {
  return isTty && (env.NO_COLOR === undefined || env.NO_COLOR === "");
}
