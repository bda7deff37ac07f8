/**
 * `vllm:lora_requests_info` as vLLM writes it (vllm/v1/metrics/loggers.py):
 * a gauge with labels `max_lora`, `running_lora_adapters` and
 * `waiting_lora_adapters` (adapter names joined with ",", in the order the
 * scheduler's queues hold them) whose value is the wall-clock time of the
 * step that set it (`set_to_current_time()`). Every label combination ever
 * set stays in the registry, so a reader takes the series with the largest
 * value as the current one. prometheus_client writes labels sorted by name
 * and floats as Go does (`1.7886264577368872e+09`).
 *
 * One difference: vLLM keeps every combination for the life of the
 * process; the sim keeps the MAX_SERIES most recently set.
 */

/** Label combinations kept (the most recently set); vLLM keeps them all. */
export const MAX_SERIES = 256;

const HELP = "Running stats on lora requests.";
const LORA_INFO_METRIC = "vllm:lora_requests_info";

/** prometheus_client's floatToGoString: Python's repr, switched to an exponent as Go would past 6 integer digits. */
export function goFloat(d: number): string {
  if (d === Infinity) return "+Inf";
  if (d === -Infinity) return "-Inf";
  if (Number.isNaN(d)) return "NaN";
  const s = Number.isInteger(d) ? `${d}.0` : String(d);
  const dot = s.indexOf(".");
  if (d > 0 && dot > 6 && !s.includes("e")) {
    const mantissa = `${s[0]}.${s.slice(1, dot)}${s.slice(dot + 1)}`.replace(/[0.]+$/, "");
    return `${mantissa}e+0${dot - 1}`;
  }
  return s;
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

export class LoraRequestsInfo {
  /** label key ("running\u0000waiting") → wall-clock seconds it was last set; Map order is recency. */
  private readonly series = new Map<string, number>();
  private last = 0;

  constructor(
    private readonly maxLora: number,
    private readonly wallSeconds: () => number = () => Date.now() / 1000,
  ) {}

  /** One step's stats: the adapters of running and of waiting requests, first seen first. */
  record(running: readonly string[], waiting: readonly string[]): void {
    const key = `${running.join(",")}\u0000${waiting.join(",")}`;
    // Two steps in one clock tick would tie; a reader needs the later one to win.
    const now = Math.max(this.wallSeconds(), this.last + 1e-6);
    this.last = now;
    this.series.delete(key);
    this.series.set(key, now);
    if (this.series.size > MAX_SERIES) this.series.delete(this.series.keys().next().value!);
  }

  /** The family's text (nothing before the first step: prometheus_client writes no sample for a label set never set). */
  text(): string {
    const lines = [`# HELP ${LORA_INFO_METRIC} ${HELP}`, `# TYPE ${LORA_INFO_METRIC} gauge`];
    for (const [key, at] of this.series) {
      const [running, waiting] = key.split("\u0000");
      lines.push(
        `${LORA_INFO_METRIC}{max_lora="${this.maxLora}",running_lora_adapters="${escapeLabel(running ?? "")}",waiting_lora_adapters="${escapeLabel(waiting ?? "")}"} ${goFloat(at)}`,
      );
    }
    return lines.join("\n") + "\n";
  }
}
