/** Which engine (and vLLM generation) produced a /metrics text, judged from the metric names present. */
import { parsePrometheusText, type Sample } from "./prom-text.ts";

export type EngineFlavor = "vllm-v0" | "vllm-v1" | "sglang" | "unknown";

/** What the operator configured for an endpoint (`endpoints[].engine`). */
export type EngineHint = "auto" | "vllm" | "sglang";

/**
 * Names only the V1 engine emits. `kv_cache_usage_perc` and the
 * `prefix_cache_*` counters were added by vllm/v1/metrics/loggers.py; the
 * `engine` label is attached by V1's per-engine binding (one series per
 * data-parallel engine).
 */
const VLLM_V1_NAMES = new Set([
  "vllm:kv_cache_usage_perc",
  "vllm:prefix_cache_queries_total",
  "vllm:prefix_cache_hits_total",
  "vllm:engine_sleep_state",
  "vllm:inter_token_latency_seconds_count",
]);

function vllmGeneration(samples: readonly Sample[]): "vllm-v0" | "vllm-v1" | undefined {
  let sawVllm = false;
  for (const s of samples) {
    if (!s.name.startsWith("vllm:")) continue;
    sawVllm = true;
    // V1 wins over V0 when both appear (e.g. the DataDog test fixture that
    // mixes versions): V1 still emits a few deprecated V0 names for
    // compatibility (gpu_cache_usage_perc), never the other way round.
    if (VLLM_V1_NAMES.has(s.name) || s.labels.engine !== undefined) return "vllm-v1";
  }
  // No V1 marker: V0. V1 always exports kv_cache_usage_perc, so a vLLM text
  // without it (with or without the V0-only names above) is the older engine.
  return sawVllm ? "vllm-v0" : undefined;
}

function countPrefix(samples: readonly Sample[], prefix: string): number {
  let n = 0;
  for (const s of samples) if (s.name.startsWith(prefix)) n++;
  return n;
}

/**
 * Detect the flavor from parsed samples (or raw text). When both `vllm:` and
 * `sglang:` names appear, the family with more series wins.
 */
export function detectFlavor(input: string | readonly Sample[]): EngineFlavor {
  const samples = typeof input === "string" ? parsePrometheusText(input).samples : input;
  const vllm = countPrefix(samples, "vllm:");
  const sglang = countPrefix(samples, "sglang:");
  if (vllm === 0 && sglang === 0) return "unknown";
  if (sglang > vllm) return "sglang";
  return vllmGeneration(samples) ?? "unknown";
}

/** Apply the configured hint: a forced family only decides between its own generations. */
export function resolveFlavor(samples: readonly Sample[], hint: EngineHint): EngineFlavor {
  switch (hint) {
    case "auto":
      return detectFlavor(samples);
    case "vllm":
      return vllmGeneration(samples) ?? "unknown";
    case "sglang":
      return countPrefix(samples, "sglang:") > 0 ? "sglang" : "unknown";
    default: {
      const never: never = hint;
      throw new Error(`unknown engine hint ${String(never)}`);
    }
  }
}
