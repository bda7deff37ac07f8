/**
 * A parser for the Prometheus text exposition format (version 0.0.4), enough
 * for engine and DCGM /metrics: HELP/TYPE lines, labels with escapes,
 * NaN/±Inf, optional timestamps. Malformed lines are skipped and counted,
 * never thrown: one bad line from an engine must not blank its whole view.
 */

export interface Sample {
  name: string;
  labels: Readonly<Record<string, string>>;
  value: number;
}

interface ParsedMetrics {
  samples: Sample[];
  /** Metric family name → TYPE (counter, gauge, histogram, summary, untyped). */
  types: Map<string, string>;
  /** Lines that could not be parsed. */
  malformed: number;
}

const NAME_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;

function parseValue(s: string): number {
  switch (s) {
    case "NaN":
      return NaN;
    case "+Inf":
    case "Inf":
      return Infinity;
    case "-Inf":
      return -Infinity;
    default: {
      const n = Number(s);
      return s === "" ? NaN : n;
    }
  }
}

/** Parse `{a="1",b="x\"y"}` starting at `i` (the `{`); returns labels and the index after `}`. */
function parseLabels(line: string, i: number): { labels: Record<string, string>; end: number } | null {
  const labels: Record<string, string> = {};
  i++; // {
  for (;;) {
    while (line[i] === " " || line[i] === ",") i++;
    if (line[i] === "}") return { labels, end: i + 1 };
    const m = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(line.slice(i));
    if (!m) return null;
    const key = m[0];
    i += key.length;
    while (line[i] === " ") i++;
    if (line[i] !== "=") return null;
    i++;
    while (line[i] === " ") i++;
    if (line[i] !== '"') return null;
    i++;
    let value = "";
    for (;;) {
      const c = line[i];
      if (c === undefined) return null;
      if (c === "\\") {
        const n = line[i + 1];
        value += n === "n" ? "\n" : (n ?? "");
        i += 2;
        continue;
      }
      if (c === '"') {
        i++;
        break;
      }
      value += c;
      i++;
    }
    labels[key] = value;
  }
}

export function parsePrometheusText(text: string): ParsedMetrics {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  let malformed = 0;
  for (const rawLine of text.split("\n")) {
    const line = rawLine.trim();
    if (line === "") continue;
    if (line.startsWith("#")) {
      const m = /^#\s*TYPE\s+(\S+)\s+(\S+)/.exec(line);
      if (m) types.set(m[1]!, m[2]!);
      continue;
    }
    const nm = NAME_RE.exec(line);
    if (!nm) {
      malformed++;
      continue;
    }
    const name = nm[0];
    let i = name.length;
    let labels: Record<string, string> = {};
    if (line[i] === "{") {
      const parsed = parseLabels(line, i);
      if (!parsed) {
        malformed++;
        continue;
      }
      labels = parsed.labels;
      i = parsed.end;
    }
    const rest = line.slice(i).trim().split(/\s+/);
    const value = parseValue(rest[0] ?? "");
    if (Number.isNaN(value) && rest[0] !== "NaN") {
      malformed++;
      continue;
    }
    samples.push({ name, labels, value });
  }
  return { samples, types, malformed };
}

/** Sum of every sample of `name` whose labels include `match`; undefined when none exists. */
export function sumSamples(samples: readonly Sample[], name: string, match: Record<string, string> = {}): number | undefined {
  let total: number | undefined;
  for (const s of samples) {
    if (s.name !== name) continue;
    let ok = true;
    for (const [k, v] of Object.entries(match)) if (s.labels[k] !== v) ok = false;
    if (!ok) continue;
    total = (total ?? 0) + s.value;
  }
  return total;
}
