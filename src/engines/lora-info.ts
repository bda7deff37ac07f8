/**
 * vLLM's LoRA state from its /metrics: `vllm:lora_requests_info` is a gauge
 * whose labels carry the state — `max_lora` (GPU slots), and the adapters of
 * the running batch and of the waiting queue as comma-joined names — and
 * whose value is the wall-clock time the engine last set that combination
 * (vllm/v1/metrics/loggers.py, `set_to_current_time()`). vLLM never removes
 * a combination once set, so the current state is the series with the
 * largest value; the others are history. Absent (LoRA off, or an engine
 * that does not export it): undefined.
 */
import type { Sample } from "./prom-text.ts";

const LORA_INFO_METRIC = "vllm:lora_requests_info";

export interface LoraInfo {
  /** Adapters one step may hold (`max_lora`); undefined when the label is missing or not a number. */
  maxLoras: number | undefined;
  /** Adapters with requests in the running batch (so in a GPU slot), in the engine's order. */
  running: string[];
  /** Adapters with requests in the engine's queue. */
  waiting: string[];
  /** The engine's wall-clock time of that state, seconds. */
  at: number;
}

function names(label: string | undefined): string[] {
  if (label === undefined || label === "") return [];
  return label.split(",").filter((n) => n !== "");
}

/** The engine's current LoRA state: the series with the latest timestamp. */
export function loraInfo(samples: readonly Sample[]): LoraInfo | undefined {
  let latest: Sample | undefined;
  for (const s of samples) {
    if (s.name !== LORA_INFO_METRIC || !Number.isFinite(s.value)) continue;
    if (latest === undefined || s.value > latest.value) latest = s;
  }
  if (latest === undefined) return undefined;
  const max = Number(latest.labels.max_lora);
  return {
    maxLoras: latest.labels.max_lora !== undefined && Number.isInteger(max) && max >= 0 ? max : undefined,
    running: names(latest.labels.running_lora_adapters),
    waiting: names(latest.labels.waiting_lora_adapters),
    at: latest.value,
  };
}
