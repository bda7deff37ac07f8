/**
 * The sim-engine's /metrics text in three flavors, with the names, labels and
 * HELP lines of the real engines (compare test/fixtures/shared/vllm-metrics__*
 * and sglang-metrics__*): vLLM V1 (vllm/v1/metrics/loggers.py, `engine` and
 * `model_name` labels), vLLM V0 (older names, `model_name` only) and SGLang.
 * Real names that promtool faults for more than their ':' (V0's
 * avg_*_toks_per_s, SGLang's *_histogram) are left out.
 */
import type { MetricsFlavor, SimStaticConfig } from "./config.ts";
import type { Engine } from "./engine.ts";
import { type Labels, PromWriter } from "./prom-writer.ts";

export function renderEngineMetrics(flavor: MetricsFlavor, engine: Engine, fixed: SimStaticConfig, now: number): string {
  return renderFlavor(flavor, engine, fixed, now) + renderSimOwn(engine, fixed);
}

/** The sim's own series (no engine has them): clients that left before their request finished; how well it kept its clock. */
function renderSimOwn(engine: Engine, fixed: SimStaticConfig): string {
  const w = new PromWriter();
  const model: Labels = [["model_name", fixed.models[0] ?? ""]];
  w.counter(
    "llmgw_sim_client_disconnects_total",
    "Requests whose client went away before the response finished (sim-engine).",
    model,
    engine.stats.disconnects,
  );
  w.histogram(
    "llmgw_sim_clock_late_seconds",
    "How late the sim-engine's timer ran against its own schedule (wall clock): its tokens went out that much late; the host's doing, not the modelled GPU's.",
    model,
    engine.clock.late,
  );
  w.counter(
    "llmgw_sim_clock_slipped_seconds_total",
    "Wall seconds by which the sim-engine's step schedule slipped (a step's end noticed after the next one was due): it served fewer tokens a second than the GPU it models.",
    model,
    engine.clock.slippedMs / 1000,
  );
  return w.text();
}

function renderFlavor(flavor: MetricsFlavor, engine: Engine, fixed: SimStaticConfig, now: number): string {
  switch (flavor) {
    case "vllm-v1":
      return renderVllm(engine, fixed, true);
    case "vllm-v0":
      return renderVllm(engine, fixed, false);
    case "sglang":
      return renderSglang(engine, fixed, now);
    default: {
      const never: never = flavor;
      throw new Error(`unknown metrics flavor ${String(never)}`);
    }
  }
}

function cacheConfigLabels(fixed: SimStaticConfig, v1: boolean): Labels {
  const l: [string, string][] = [
    ["block_size", String(fixed.blockSize)],
    // vLLM's CacheConfig.metrics_info writes each field as str(value): the --kv-cache-dtype given.
    ["cache_dtype", fixed.kvCacheDtype ?? "auto"],
    ["enable_prefix_caching", "True"],
    ["gpu_memory_utilization", "0.9"],
    ["num_cpu_blocks", "0"],
    ["num_gpu_blocks", String(fixed.numGpuBlocks)],
    ["num_gpu_blocks_override", "None"],
    ["sliding_window", "None"],
    ["swap_space_bytes", "4294967296"],
  ];
  if (v1) l.unshift(["engine", "0"]);
  return l;
}

function renderVllm(engine: Engine, fixed: SimStaticConfig, v1: boolean): string {
  const st = engine.stats;
  const model = fixed.models[0] ?? "";
  const base: Labels = v1
    ? [
        ["engine", "0"],
        ["model_name", model],
      ]
    : [["model_name", model]];
  const w = new PromWriter();
  w.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", cacheConfigLabels(fixed, v1), 1);
  w.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", base, engine.runningCount);
  w.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", base, engine.waitingCount);
  if (v1) {
    w.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", base, engine.kv.usage);
    w.counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", base, st.prefixQueries);
    w.counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", base, st.prefixHits);
    w.family(
      "vllm:engine_sleep_state",
      "gauge",
      "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
      [
        { labels: [...base, ["sleep_state", "awake"]], value: 1 },
        { labels: [...base, ["sleep_state", "weights_offloaded"]], value: 0 },
        { labels: [...base, ["sleep_state", "discard_all"]], value: 0 },
      ],
    );
  } else {
    w.gauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.", base, 0);
    w.gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", base, engine.kv.usage);
    w.gauge("vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.", base, 0);
    w.gauge("vllm:gpu_prefix_cache_hit_rate", "GPU prefix cache block hit rate.", base, st.prefixQueries > 0 ? st.prefixHits / st.prefixQueries : 0);
    w.counter("vllm:gpu_prefix_cache_queries_total", "GPU prefix cache queries, in terms of number of queried tokens.", base, st.prefixQueries);
    w.counter("vllm:gpu_prefix_cache_hits_total", "GPU prefix cache hits, in terms of number of cached tokens.", base, st.prefixHits);
  }
  w.counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", base, st.preemptions);
  w.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", base, st.promptTokens);
  w.counter("vllm:generation_tokens_total", "Number of generation tokens processed.", base, st.generationTokens);
  const reasons = (["stop", "length", "abort"] as const).map((r) => ({ labels: [...base, ["finished_reason", r]] as Labels, value: st.success[r] }));
  w.family("vllm:request_success_total", "counter", "Count of successfully processed requests.", reasons);
  w.histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", base, st.promptLen);
  w.histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", base, st.generationLen);
  w.histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", base, st.iterationTokens);
  w.histogram("vllm:request_params_n", "Histogram of the n request parameter.", base, st.paramsN);
  w.histogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", base, st.paramsMaxTokens);
  w.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", base, st.ttft);
  w.histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", base, st.tpot);
  if (v1) {
    w.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", base, st.itl);
    w.histogram("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", base, st.tpot);
  }
  w.histogram("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", base, st.e2e);
  w.histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", base, st.queue);
  w.histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", base, st.inference);
  w.histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", base, st.prefill);
  w.histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", base, st.decode);
  return w.text();
}

function renderSglang(engine: Engine, fixed: SimStaticConfig, now: number): string {
  const st = engine.stats;
  const model = fixed.models[0] ?? "";
  const base: Labels = [
    ["model_name", model],
    ["tp_rank", "0"],
  ];
  const hist: Labels = [["model_name", model]];
  const capacity = fixed.numGpuBlocks * fixed.blockSize;
  const usedTokens = engine.kv.used * fixed.blockSize;
  const w = new PromWriter();
  w.gauge("sglang:num_running_reqs", "The number of running requests.", base, engine.runningCount);
  w.gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", base, engine.waitingCount);
  w.gauge("sglang:num_used_tokens", "The number of used tokens.", base, usedTokens);
  w.gauge("sglang:token_usage", "The token usage.", base, capacity > 0 ? usedTokens / capacity : 0);
  w.gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", base, st.prefixQueries > 0 ? st.prefixHits / st.prefixQueries : 0);
  w.gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", base, capacity);
  w.gauge("sglang:max_running_requests", "The maximum number of running requests.", base, fixed.maxNumSeqs);
  w.gauge("sglang:gen_throughput", "The generation throughput (token/s).", base, st.generationThroughput(now));
  w.gauge("sglang:num_retracted_reqs", "The number of currently retracted requests.", base, 0);
  w.counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", base, st.promptTokens);
  w.counter("sglang:generation_tokens_total", "Number of generation tokens processed.", base, st.generationTokens);
  w.counter("sglang:cached_tokens_total", "Number of cached prompt tokens.", base, st.prefixHits);
  w.counter("sglang:num_requests_total", "Number of requests processed.", base, st.success.stop + st.success.length + st.success.abort);
  w.histogram("sglang:time_to_first_token_seconds", "Time to first token in seconds.", hist, st.ttft);
  w.histogram("sglang:inter_token_latency_seconds", "Inter-token latency in seconds.", hist, st.itl);
  w.histogram("sglang:time_per_output_token_seconds", "Histogram of time per output token in seconds.", hist, st.tpot);
  w.histogram("sglang:e2e_request_latency_seconds", "End-to-end request latency in seconds.", hist, st.e2e);
  w.histogram("sglang:queue_time_seconds", "Request queue time in seconds.", hist, st.queue);
  return w.text();
}
