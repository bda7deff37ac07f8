/**
 * One view of an engine's load (running, waiting, KV usage, prefix-cache hit
 * rate) from vLLM V0, vLLM V1 or SGLang /metrics text. Absent stays undefined.
 */

import { type EngineFlavor, type EngineHint, resolveFlavor } from "./flavor.ts";
import { type LoraInfo, loraInfo } from "./lora-info.ts";
import { parsePrometheusText, type Sample } from "./prom-text.ts";
import { clampUnit, finiteSamples, firstPresent, maxAcrossSeries, meanAcrossSeries, sumAcrossSeries } from "./series.ts";

export interface EngineMetrics {
  /** Detected from the names present (or narrowed by the configured engine). */
  flavor: EngineFlavor;
  /** Requests in the running batch, summed over models and data-parallel engines. */
  running: number | undefined;
  /** Requests queued in the engine, summed likewise. */
  waiting: number | undefined;
  /** KV-cache occupancy in [0,1]; the fullest engine/model when there are several. */
  kvUsage: number | undefined;
  /** Prefix-cache hit rate in [0,1] where derivable (lifetime ratio for vLLM V1). */
  prefixCacheHitRate?: number;
  /** The engine's own cap on concurrently running requests, where it exports one. */
  maxRunning?: number;
  /** LoRA adapters running and waiting, and the slots (vLLM's vllm:lora_requests_info); absent when not exported. */
  lora?: LoraInfo;
  /** Lines of the text the Prometheus parser could not read. */
  malformedLines: number;
}

/**
 * SGLang starts one scheduler per tensor-parallel (and pipeline) rank and each
 * rank reports the same batch and queue (python/sglang/srt/metrics/collector.py
 * labels them `tp_rank`/`pp_rank`). Series differing only in these labels are
 * collapsed with max, never added. `dp_rank` (data-parallel attention) are
 * distinct queues and are summed.
 */
const SGLANG_REPLICATED_LABELS: ReadonlySet<string> = new Set(["tp_rank", "pp_rank"]);

/**
 * KV usage: the max over series, not the mean or sum. With several models or
 * V1 data-parallel engines behind one URL, each has its own KV pool and a
 * request lands on one of them; the fullest pool is the one that will preempt
 * or queue first, and an average would hide it.
 */
function kvMax(samples: readonly Sample[], names: readonly string[]): number | undefined {
  const name = firstPresent(samples, names);
  return name === undefined ? undefined : clampUnit(maxAcrossSeries(samples, name));
}

function ratio(hits: number | undefined, queries: number | undefined): number | undefined {
  if (hits === undefined || queries === undefined || queries <= 0) return undefined;
  return clampUnit(hits / queries);
}

/** Sum of a per-engine info label (e.g. `max_num_seqs`), one value per `engine`. */
function infoLabelSum(samples: readonly Sample[], label: string): number | undefined {
  const perEngine = new Map<string, number>();
  for (const s of samples) {
    if (!s.name.startsWith("vllm:") || !s.name.endsWith("_info")) continue;
    const raw = s.labels[label];
    const v = raw === undefined ? NaN : Number(raw);
    if (Number.isFinite(v) && v > 0) perEngine.set(s.labels.engine ?? "", v);
  }
  if (perEngine.size === 0) return undefined;
  let total = 0;
  for (const v of perEngine.values()) total += v;
  return total;
}

function mapVllm(samples: readonly Sample[], flavor: "vllm-v0" | "vllm-v1"): Omit<EngineMetrics, "malformedLines"> {
  // V1 sets kv_cache_usage_perc and the deprecated gpu_cache_usage_perc from
  // the same value (scheduler_stats.kv_cache_usage = BlockPool.get_usage(),
  // "between 0.0 and 1.0", vllm/v1/core/block_pool.py); V0's
  // gpu_cache_usage_perc is likewise a fraction ("1 means 100 percent usage").
  // Prefer the current name and fall back to the old one.
  const kvNames = flavor === "vllm-v1" ? ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"] : ["vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"];
  const out: Omit<EngineMetrics, "malformedLines"> = {
    flavor,
    // The `engine` label (V1 data parallelism) marks separate schedulers with
    // separate queues, and `model_name` separate models: both are summed.
    running: sumAcrossSeries(samples, "vllm:num_requests_running"),
    waiting: sumAcrossSeries(samples, "vllm:num_requests_waiting"),
    kvUsage: kvMax(samples, kvNames),
  };
  const hitsName = firstPresent(samples, ["vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"]);
  const queriesName = firstPresent(samples, ["vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"]);
  // Counters since engine start, so this is a lifetime ratio, not a recent
  // one; a caller wanting a windowed rate differences two scrapes.
  const hitRate =
    hitsName !== undefined && queriesName !== undefined
      ? ratio(sumAcrossSeries(samples, hitsName), sumAcrossSeries(samples, queriesName))
      : clampUnit(meanAcrossSeries(samples, "vllm:gpu_prefix_cache_hit_rate"));
  if (hitRate !== undefined) out.prefixCacheHitRate = hitRate;
  // vLLM's cache_config_info carries no max_num_seqs today; read it if a
  // version or a patched build adds it to an *_info series, else absent.
  const maxRunning = infoLabelSum(samples, "max_num_seqs");
  if (maxRunning !== undefined) out.maxRunning = maxRunning;
  const lora = loraInfo(samples);
  if (lora !== undefined) out.lora = lora;
  return out;
}

function mapSglang(samples: readonly Sample[]): Omit<EngineMetrics, "malformedLines"> {
  const out: Omit<EngineMetrics, "malformedLines"> = {
    flavor: "sglang",
    running: sumAcrossSeries(samples, "sglang:num_running_reqs", SGLANG_REPLICATED_LABELS),
    waiting: sumAcrossSeries(samples, "sglang:num_queue_reqs", SGLANG_REPLICATED_LABELS),
    kvUsage: clampUnit(maxAcrossSeries(samples, "sglang:token_usage")),
  };
  const hitRate = clampUnit(meanAcrossSeries(samples, "sglang:cache_hit_rate", SGLANG_REPLICATED_LABELS));
  if (hitRate !== undefined) out.prefixCacheHitRate = hitRate;
  // Older SGLang exported its configured cap as a gauge; newer builds do not.
  if (finiteSamples(samples, "sglang:max_running_requests").length > 0) {
    const maxRunning = sumAcrossSeries(samples, "sglang:max_running_requests", SGLANG_REPLICATED_LABELS);
    if (maxRunning !== undefined && maxRunning > 0) out.maxRunning = maxRunning;
  }
  return out;
}

/** Map already-parsed samples; `malformedLines` is the caller's parser count. */
export function mapEngineSamples(samples: readonly Sample[], hint: EngineHint, malformedLines = 0): EngineMetrics {
  const flavor = resolveFlavor(samples, hint);
  switch (flavor) {
    case "vllm-v0":
    case "vllm-v1":
      return { ...mapVllm(samples, flavor), malformedLines };
    case "sglang":
      return { ...mapSglang(samples), malformedLines };
    case "unknown":
      return { flavor, running: undefined, waiting: undefined, kvUsage: undefined, malformedLines };
    default: {
      const never: never = flavor;
      throw new Error(`unknown flavor ${String(never)}`);
    }
  }
}

/** Parse an engine's /metrics text into the common view. Never throws on bad input. */
export function parseEngineMetrics(text: string, flavor: EngineHint): EngineMetrics {
  const parsed = parsePrometheusText(text);
  return mapEngineSamples(parsed.samples, flavor, parsed.malformed);
}

export type { EngineHint } from "./flavor.ts";
export { detectFlavor } from "./flavor.ts";
