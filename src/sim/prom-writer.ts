/** A minimal Prometheus text (0.0.4) writer: one HELP/TYPE header per family, labels escaped. */
import type { Histogram } from "./histogram.ts";

export type Labels = readonly (readonly [string, string])[];

function escapeLabel(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function labelText(labels: Labels): string {
  if (labels.length === 0) return "";
  return `{${labels.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}`;
}

/** Python's float formatting for `le` (1 → "1.0"), as prometheus_client writes bucket bounds. */
function pyFloat(n: number): string {
  if (n === Infinity) return "+Inf";
  return Number.isInteger(n) ? `${n}.0` : String(n);
}

function num(n: number): string {
  if (Number.isNaN(n)) return "NaN";
  if (n === Infinity) return "+Inf";
  if (n === -Infinity) return "-Inf";
  return String(n);
}

export class PromWriter {
  private readonly lines: string[] = [];

  private header(name: string, help: string, type: string): void {
    this.lines.push(`# HELP ${name} ${help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")}`, `# TYPE ${name} ${type}`);
  }

  /** One family with one or more samples. */
  family(name: string, type: "gauge" | "counter", help: string, samples: readonly { labels: Labels; value: number }[]): this {
    this.header(name, help, type);
    for (const s of samples) this.lines.push(`${name}${labelText(s.labels)} ${num(s.value)}`);
    return this;
  }

  gauge(name: string, help: string, labels: Labels, value: number): this {
    return this.family(name, "gauge", help, [{ labels, value }]);
  }

  counter(name: string, help: string, labels: Labels, value: number): this {
    return this.family(name, "counter", help, [{ labels, value }]);
  }

  histogram(name: string, help: string, labels: Labels, h: Histogram): this {
    this.header(name, help, "histogram");
    const cum = h.cumulative();
    const bounds = [...h.bounds, Infinity];
    for (let i = 0; i < bounds.length; i++) {
      this.lines.push(`${name}_bucket${labelText([...labels, ["le", pyFloat(bounds[i]!)]])} ${num(cum[i]!)}`);
    }
    this.lines.push(`${name}_sum${labelText(labels)} ${num(h.sum)}`, `${name}_count${labelText(labels)} ${num(h.count)}`);
    return this;
  }

  text(): string {
    return this.lines.join("\n") + "\n";
  }
}
