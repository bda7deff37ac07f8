/** `llmgw sim-engine`: a simulated vLLM-compatible engine (optionally with DCGM-style GPU metrics). */
import { boolFlag, type CommandSpec, type ParsedArgs, parseCommandArgs } from "../shared/flags.ts";
import { flushLogger, initLogger, logger, logListening } from "../shared/logger.ts";
import { holdSimGpus, SIM_GPU_LEDGER_ENV, visibleGpuIndices } from "../shared/sim-gpu-ledger.ts";
import { buildSimConfig } from "./command-config.ts";
import { DEFAULT_SIM_PORT } from "./config.ts";
import { DEFAULT_MAX_LORA_RANK, DEFAULT_MAX_LORAS, expandLoraModulesArgv } from "./lora/lora-config.ts";
import { FRONTEND_JITTER_MS, STEP_NOISE_CV } from "./noise.ts";
import { DEFAULT_PROFILE, listProfiles } from "./profiles/catalog.ts";
import { FITTED } from "./profiles/efficiency.ts";
import { GPUS } from "./profiles/gpu-facts.ts";
import { ARCHS } from "./profiles/model-facts.ts";
import { SimServer } from "./server.ts";

const USAGE = `usage: llmgw sim-engine --model NAME [--model NAME2 …] [flags]
       llmgw sim-engine --list-profiles

A simulated vLLM OpenAI server that steps like vLLM's V1 scheduler: each
step decodes the running requests and fills the rest of the token budget
with prefill chunks; its duration follows from what it computes, derived
from a GPU's and a model's public figures. Control API: GET /sim/state,
POST /sim/config.

Profile (default ${DEFAULT_PROFILE}; vLLM's defaults for that GPU follow):
  --profile NAME              a named GPU × model pair (--list-profiles)
  --gpu NAME                  ${GPUS.map((g) => g.id).join(", ")}
  --arch NAME                 ${ARCHS.map((a) => a.id).join(", ")}
  --tp N                      tensor-parallel GPUs (default 1)
  --dtype bf16|fp8            weight dtype (default bf16)
  --kv-cache-dtype D          auto | fp8 | fp8_e4m3 | fp8_e5m2, as vLLM's: fp8 stores K and V in one byte an
                              element, so the same memory holds twice the blocks and decodes read half the KV
                              bytes (default auto: the model's bf16)
  --gpu-memory-utilization F  vLLM's share of GPU memory (default 0.9)
  --list-profiles             print the profiles with their derived figures and exit
  --time-scale X              the engine's clock runs X times faster (default 1)
  --seed N                    seed of the engine's noise (step times, API-server latency): the same seed draws
                              the same numbers (default: a random one, in the startup log and /sim/state)

Scheduler and KV cache (defaults from the profile):
  --max-num-seqs N            batch slots
  --max-num-batched-tokens N  token budget per step
  --num-gpu-blocks N          KV cache blocks
  --block-size N              tokens per KV block (default 16)
  --max-model-len N           context length (at most blocks × block size)
  --no-async-scheduling       plan each step after the last one ended, as vLLM before 0.14; by default,
                              as vLLM's async scheduling, each step is planned while the one before it
                              runs, so a request reaching a busy engine joins the step after next

Timing overrides (each replaces its part of the derived step model):
  --itl-ms MS                 a lone decode step; scales every derived step
  --batch-slowdown F          decode step = itl × (1 + F × running/max-num-seqs)
  --prefill-overhead-ms MS    flat prefill: a request's own fixed prefill time, in parallel (default 5)
  --prefill-ms-per-token MS   flat prefill: cost per prefill token (default 0.05)
  --jitter F                  the spread of each step's time: the coefficient of variation of its normal noise
                              (default ${STEP_NOISE_CV}, measured on real H100 runs; 0: every step as modelled)
  --frontend-jitter-ms MS     the mean of the exponential part of a request's API-server latency, its mean kept
                              (default ${FRONTEND_JITTER_MS}; applies where the API server is modelled)
  --frontend-latency-ms MS    the API server's time per request before the engine sees it (fitted: ${FITTED.frontendLatencyMs})
  --frontend-service-ms MS    of which one request at a time: a burst queues for it (fitted: ${FITTED.frontendServiceMs})

Answers:
  --output-len N              natural answer length, fixed (= --output-len-dist fixed:N)
  --output-len-dist SPEC      fixed:N | lognormal:MEDIAN:SIGMA | uniform:MIN:MAX (default lognormal:129:0.94)
  --embedding-dim N           embedding vector size (default 384)

Server:
  --host HOST                 listen address (default 127.0.0.1)
  --port N                    API port, 0 = any free port (default ${DEFAULT_SIM_PORT})
  --model NAME                served model name (repeatable; the first labels metrics)
  --startup-ms MS             "loading weights" this long (default 0)
  --startup-answers MODE      while loading: held (default, as vLLM: requests wait, answered once loaded)
                              or split (/health 200 at once, /v1/models and the API 503)
  --metrics-flavor F          vllm-v1 | vllm-v0 | sglang (default vllm-v1)
  --fault-rate P              probability of injecting a fault per request (default 0)
  --fault-types LIST          500,429,503,no-headers,no-first-token,stall:N,cut:N,slow:MS
  --reject-continuation       answer 400 to continue_final_message / add_generation_prompt
  --no-messages-api           answer 404 on /v1/messages and /v1/messages/count_tokens (an engine without Anthropic's API)
  --enable-prompt-tokens-details
                              as vLLM: usage.prompt_tokens_details.cached_tokens on chat and completions
                              answers that the prefix cache served (default: prompt_tokens_details null)
  --api-key KEY               as vLLM: every route but /health, /metrics, /version … (and /sim/*) wants
                              Authorization: Bearer KEY, else 401 {"error":"Unauthorized"} (default: VLLM_API_KEY)
  --kv-events-config JSON     publish vLLM's KV-cache events over ZMQ, as vLLM's flag: e.g.
                              '{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557",
                              "replay_endpoint":"tcp://*:5558","topic":"kv"}' (the endpoint must be a wildcard one)

LoRA adapters (as vLLM; requests name an adapter as their model):
  --enable-lora               serve LoRA adapters
  --lora-modules ITEM …       adapters loaded at start: name=path, or JSON
                              '{"name":…,"path":…,"base_model_name":…}' (several after one flag, or the flag again)
  --max-loras N               adapters one step's batch may hold, GPU slots (default ${DEFAULT_MAX_LORAS})
  --max-lora-rank N           largest adapter rank (default ${DEFAULT_MAX_LORA_RANK}); a path with adapter_config.json gives its own r
  --max-cpu-loras N           adapters kept in host memory (default max-loras)
  --lora-swap-ms MS           fix the cost of copying an adapter into a GPU slot (default: from its size and PCIe)
  --lora-disk-ms MS           fix the cost of reading an adapter from disk (default: estimated from its size)
  VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 (environment) adds POST /v1/load_lora_adapter and /v1/unload_lora_adapter

DCGM exporter:
  --gpus N                    simulated GPUs for the DCGM listener (default 0)
  --gpu-model NAME            GPU name in the DCGM text (default the profile's GPU)
  --dcgm-port N               DCGM-exporter /metrics port, 0 = any (needs --gpus)
  --dcgm-model-label L        modelName (default, as dcgm-exporter) or DCGM_FI_DEV_NAME (promtool-clean text)`;

/** Columns padded to their widest cell (the sim sits below bench's report module, so it prints its own). */
function table(title: string, columns: string[], rows: string[][]): string {
  const widths = columns.map((c, i) => Math.max(c.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  return [title, line(columns), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

function printProfiles(): void {
  const rows = listProfiles().map((r) => [
    r.name,
    r.gpu,
    r.arch,
    String(r.tp),
    r.dtype,
    r.kvCacheDtype,
    String(r.maxNumSeqs),
    String(r.maxNumBatchedTokens),
    String(r.numGpuBlocks),
    String(r.kvTokens),
    r.stepBatch1Ms.toFixed(2),
    r.stepDecode256Ms.toFixed(1),
    r.stepBudgetMs.toFixed(1),
    r.what,
  ]);
  const columns = [
    "profile",
    "gpu",
    "arch",
    "tp",
    "dtype",
    "kv dtype",
    "max seqs",
    "budget",
    "KV blocks",
    "KV tokens",
    "step b=1",
    "step b=256",
    "step budget",
    "what",
  ];
  console.log(
    table(
      "sim-engine profiles (derived step times in ms: a lone decode, 256 decodes of 1k-token contexts, one prefill chunk filling the budget)",
      columns,
      rows,
    ),
  );
}

/** On an agent's simulated GPUs, what this engine holds goes into their ledger (src/shared/sim-gpu-ledger.ts); returns its release. */
function holdLedger(sim: SimServer): () => void {
  const dir = process.env[SIM_GPU_LEDGER_ENV];
  const gpus = visibleGpuIndices(process.env.CUDA_VISIBLE_DEVICES);
  const mib = sim.heldMiBPerGpu();
  if (!dir || gpus.length === 0 || mib === undefined) return () => {};
  try {
    return holdSimGpus(dir, process.pid, gpus, mib);
  } catch (err) {
    logger().warn({ dir, err: err instanceof Error ? err.message : String(err) }, "cannot write the simulated GPUs' ledger: their memory reads as free");
    return () => {};
  }
}

export const simEngineCommand: CommandSpec = {
  name: "sim-engine",
  summary: "run a simulated vLLM-compatible engine",
  usage: USAGE,
  options: {
    host: { type: "string" },
    port: { type: "string" },
    model: { type: "string", multiple: true },
    profile: { type: "string" },
    gpu: { type: "string" },
    arch: { type: "string" },
    tp: { type: "string" },
    dtype: { type: "string" },
    "kv-cache-dtype": { type: "string" },
    "gpu-memory-utilization": { type: "string" },
    "list-profiles": { type: "boolean" },
    "time-scale": { type: "string" },
    "max-num-seqs": { type: "string" },
    "max-num-batched-tokens": { type: "string" },
    "num-gpu-blocks": { type: "string" },
    "block-size": { type: "string" },
    "max-model-len": { type: "string" },
    "itl-ms": { type: "string" },
    "prefill-overhead-ms": { type: "string" },
    "prefill-ms-per-token": { type: "string" },
    jitter: { type: "string" },
    "frontend-jitter-ms": { type: "string" },
    seed: { type: "string" },
    "frontend-latency-ms": { type: "string" },
    "frontend-service-ms": { type: "string" },
    "batch-slowdown": { type: "string" },
    "output-len": { type: "string" },
    "output-len-dist": { type: "string" },
    "embedding-dim": { type: "string" },
    "startup-ms": { type: "string" },
    "startup-answers": { type: "string" },
    "metrics-flavor": { type: "string" },
    "fault-rate": { type: "string" },
    "fault-types": { type: "string", multiple: true },
    gpus: { type: "string" },
    "gpu-model": { type: "string" },
    "dcgm-port": { type: "string" },
    "dcgm-model-label": { type: "string" },
    "reject-continuation": { type: "boolean" },
    "no-messages-api": { type: "boolean" },
    "enable-prompt-tokens-details": { type: "boolean" },
    "no-async-scheduling": { type: "boolean" },
    "api-key": { type: "string" },
    "kv-events-config": { type: "string" },
    "enable-lora": { type: "boolean" },
    "lora-modules": { type: "string", multiple: true },
    "max-loras": { type: "string" },
    "max-lora-rank": { type: "string" },
    "max-cpu-loras": { type: "string" },
    "lora-swap-ms": { type: "string" },
    "lora-disk-ms": { type: "string" },
  },
  // vLLM's --lora-modules takes several items after one flag: each gets a flag of its own before parsing.
  async dispatch(argv: string[]) {
    const args = parseCommandArgs(simEngineCommand, expandLoraModulesArgv(argv));
    if (args.values.help === true) {
      console.log(USAGE);
      return 0;
    }
    return await simEngineCommand.run(args);
  },
  async run(args: ParsedArgs) {
    if (boolFlag(args, "list-profiles")) {
      printProfiles();
      return 0;
    }
    const { fixed, live, host, port, dcgmPort } = buildSimConfig(args);
    const log = initLogger({ role: "sim-engine" });
    const sim = new SimServer(fixed, live);
    const urls = sim.listen(host, port, dcgmPort);
    const release = holdLedger(sim);
    logListening(log, "api", urls.api);
    if (urls.dcgm) logListening(log, "dcgm", urls.dcgm);
    if (urls.kvEvents) logListening(log, "kv-events", urls.kvEvents);
    if (urls.kvReplay) logListening(log, "kv-replay", urls.kvReplay);
    log.info(
      {
        models: fixed.models,
        profile: fixed.profile,
        kv_cache_dtype: fixed.kvCacheDtype ?? "auto",
        max_num_seqs: fixed.maxNumSeqs,
        max_num_batched_tokens: fixed.maxNumBatchedTokens,
        num_gpu_blocks: fixed.numGpuBlocks,
        itl_ms: live.itlMs,
        seed: fixed.seed,
        time_scale: fixed.timeScale,
        metrics_flavor: fixed.metricsFlavor,
      },
      "sim-engine ready",
    );
    await new Promise<void>((resolve) => {
      let stopping = false;
      // Handlers stay installed: a second signal (e.g. the re-exec wrapper forwarding the group's SIGTERM) must not kill us mid-shutdown.
      const onSignal = (sig: NodeJS.Signals) => {
        if (stopping) return;
        stopping = true;
        log.info({ signal: sig }, "shutting down");
        void sim.close().finally(release).then(resolve, resolve);
      };
      process.on("SIGINT", onSignal);
      process.on("SIGTERM", onSignal);
    });
    await flushLogger();
    return 0;
  },
};
