/** `llmgw sim-engine`: a simulated vLLM-compatible engine (optionally with DCGM-style GPU metrics). */
import { boolFlag, numberFlag, stringFlag, stringListFlag, UsageError, type CommandSpec, type ParsedArgs } from "../shared/flags.ts";
import { flushLogger, initLogger, logListening } from "../shared/logger.ts";
import {
  DEFAULT_BATCH_SLOWDOWN,
  DEFAULT_BLOCK_SIZE_TOKENS,
  DEFAULT_EMBEDDING_DIM,
  DEFAULT_GPU_MODEL,
  DEFAULT_ITL_MS,
  DEFAULT_MAX_MODEL_LEN_TOKENS,
  DEFAULT_MAX_NUM_SEQS,
  DEFAULT_NUM_GPU_BLOCKS,
  DEFAULT_OUTPUT_LEN_TOKENS,
  DEFAULT_PREFILL_MS_PER_TOKEN,
  DEFAULT_PREFILL_OVERHEAD_MS,
  DEFAULT_SIM_PORT,
  METRICS_FLAVORS,
  newGpuFaultState,
  type MetricsFlavor,
  type SimLiveConfig,
  type SimStaticConfig,
} from "./config.ts";
import { parseFaultList } from "./faults.ts";
import { SimServer } from "./server.ts";

const USAGE = `usage: llmgw sim-engine --model NAME [--model NAME2 …] [flags]

A simulated vLLM OpenAI server: continuous batching over a paged KV cache
with a prefix cache, vLLM's SSE format, /metrics and error shapes, and
injectable faults. Control API: GET /sim/state, POST /sim/config.

  --host HOST                 listen address (default 127.0.0.1)
  --port N                    API port, 0 = any free port (default ${DEFAULT_SIM_PORT})
  --model NAME                served model name (repeatable; the first labels metrics)
  --max-num-seqs N            batch slots (default ${DEFAULT_MAX_NUM_SEQS})
  --num-gpu-blocks N          KV cache blocks (default ${DEFAULT_NUM_GPU_BLOCKS})
  --block-size N              tokens per KV block (default ${DEFAULT_BLOCK_SIZE_TOKENS})
  --max-model-len N           context length in tokens (default ${DEFAULT_MAX_MODEL_LEN_TOKENS}, at most blocks × block size)
  --itl-ms MS                 decode step time at an empty batch (default ${DEFAULT_ITL_MS})
  --prefill-overhead-ms MS    fixed prefill cost (default ${DEFAULT_PREFILL_OVERHEAD_MS})
  --prefill-ms-per-token MS   prefill cost per uncached prompt token (default ${DEFAULT_PREFILL_MS_PER_TOKEN})
  --jitter F                  ±fraction of random step-time noise (default 0)
  --batch-slowdown F          step time × (1 + F × running/max-num-seqs) (default ${DEFAULT_BATCH_SLOWDOWN})
  --output-len N              tokens generated when max_tokens does not cap (default ${DEFAULT_OUTPUT_LEN_TOKENS})
  --embedding-dim N           embedding vector size (default ${DEFAULT_EMBEDDING_DIM})
  --startup-ms MS             "loading weights": /health 200, API 503 until then (default 0)
  --metrics-flavor F          vllm-v1 | vllm-v0 | sglang (default vllm-v1)
  --fault-rate P              probability of injecting a fault per request (default 0)
  --fault-types LIST          500,429,503,no-headers,no-first-token,stall:N,cut:N,slow:MS
  --gpus N                    simulated GPUs for the DCGM listener (default 0)
  --gpu-model NAME            GPU model name (default "${DEFAULT_GPU_MODEL}")
  --dcgm-port N               DCGM-exporter /metrics port, 0 = any (needs --gpus)
  --dcgm-model-label L        DCGM_FI_DEV_NAME (default, promtool-clean) or modelName (as dcgm-exporter)
  --reject-continuation       answer 400 to continue_final_message / add_generation_prompt (an API without chat prefills)`;

function buildConfig(args: ParsedArgs): { fixed: SimStaticConfig; live: SimLiveConfig; host: string; port: number; dcgmPort: number | undefined } {
  const models = stringListFlag(args, "model");
  if (models.length === 0) throw new UsageError("--model is required");
  const flavor = stringFlag(args, "metrics-flavor") ?? "vllm-v1";
  if (!METRICS_FLAVORS.includes(flavor as MetricsFlavor)) throw new UsageError(`--metrics-flavor: expected ${METRICS_FLAVORS.join(", ")}, got '${flavor}'`);
  const numGpuBlocks = numberFlag(args, "num-gpu-blocks", DEFAULT_NUM_GPU_BLOCKS, { min: 1, integer: true });
  const blockSize = numberFlag(args, "block-size", DEFAULT_BLOCK_SIZE_TOKENS, { min: 1, max: 1024, integer: true });
  const capacity = numGpuBlocks * blockSize;
  const maxModelLen = numberFlag(args, "max-model-len", Math.min(DEFAULT_MAX_MODEL_LEN_TOKENS, capacity), { min: 2, integer: true });
  if (maxModelLen > capacity) throw new UsageError(`--max-model-len ${maxModelLen} exceeds the KV cache (${numGpuBlocks} blocks × ${blockSize} = ${capacity} tokens)`);
  const gpus = numberFlag(args, "gpus", 0, { min: 0, max: 64, integer: true });
  const dcgmRaw = stringFlag(args, "dcgm-port");
  const dcgmPort = dcgmRaw === undefined ? undefined : numberFlag(args, "dcgm-port", 0, { min: 0, max: 65535, integer: true });
  if (dcgmPort !== undefined && gpus === 0) throw new UsageError("--dcgm-port needs --gpus N (N ≥ 1)");
  const modelLabel = stringFlag(args, "dcgm-model-label") ?? "DCGM_FI_DEV_NAME";
  if (modelLabel !== "DCGM_FI_DEV_NAME" && modelLabel !== "modelName") throw new UsageError(`--dcgm-model-label: expected DCGM_FI_DEV_NAME or modelName, got '${modelLabel}'`);
  let faultTypes;
  try {
    faultTypes = parseFaultList(stringListFlag(args, "fault-types"));
  } catch (err) {
    throw new UsageError(`--fault-types: ${err instanceof Error ? err.message : String(err)}`);
  }
  const fixed: SimStaticConfig = Object.freeze({
    models: Object.freeze([...new Set(models)]),
    maxNumSeqs: numberFlag(args, "max-num-seqs", DEFAULT_MAX_NUM_SEQS, { min: 1, integer: true }),
    numGpuBlocks,
    blockSize,
    maxModelLen,
    outputLen: numberFlag(args, "output-len", DEFAULT_OUTPUT_LEN_TOKENS, { min: 1, integer: true }),
    embeddingDim: numberFlag(args, "embedding-dim", DEFAULT_EMBEDDING_DIM, { min: 1, max: 65536, integer: true }),
    startupMs: numberFlag(args, "startup-ms", 0, { min: 0 }),
    metricsFlavor: flavor as MetricsFlavor,
    gpus,
    gpuModel: stringFlag(args, "gpu-model") ?? DEFAULT_GPU_MODEL,
    dcgmModelLabel: modelLabel,
    rejectContinuation: boolFlag(args, "reject-continuation"),
  });
  const live: SimLiveConfig = {
    itlMs: numberFlag(args, "itl-ms", DEFAULT_ITL_MS, { min: 0 }),
    prefillOverheadMs: numberFlag(args, "prefill-overhead-ms", DEFAULT_PREFILL_OVERHEAD_MS, { min: 0 }),
    prefillMsPerToken: numberFlag(args, "prefill-ms-per-token", DEFAULT_PREFILL_MS_PER_TOKEN, { min: 0 }),
    jitter: numberFlag(args, "jitter", 0, { min: 0, max: 1 }),
    batchSlowdown: numberFlag(args, "batch-slowdown", DEFAULT_BATCH_SLOWDOWN, { min: 0 }),
    faultRate: numberFlag(args, "fault-rate", 0, { min: 0, max: 1 }),
    faultTypes,
    dead: false,
    dcgmDead: false,
    gpus: Array.from({ length: gpus }, newGpuFaultState),
  };
  const port = numberFlag(args, "port", DEFAULT_SIM_PORT, { min: 0, max: 65535, integer: true });
  return { fixed, live, host: stringFlag(args, "host") ?? "127.0.0.1", port, dcgmPort };
}

export const simEngineCommand: CommandSpec = {
  name: "sim-engine",
  summary: "run a simulated vLLM-compatible engine",
  usage: USAGE,
  options: {
    host: { type: "string" },
    port: { type: "string" },
    model: { type: "string", multiple: true },
    "max-num-seqs": { type: "string" },
    "num-gpu-blocks": { type: "string" },
    "block-size": { type: "string" },
    "max-model-len": { type: "string" },
    "itl-ms": { type: "string" },
    "prefill-overhead-ms": { type: "string" },
    "prefill-ms-per-token": { type: "string" },
    jitter: { type: "string" },
    "batch-slowdown": { type: "string" },
    "output-len": { type: "string" },
    "embedding-dim": { type: "string" },
    "startup-ms": { type: "string" },
    "metrics-flavor": { type: "string" },
    "fault-rate": { type: "string" },
    "fault-types": { type: "string", multiple: true },
    gpus: { type: "string" },
    "gpu-model": { type: "string" },
    "dcgm-port": { type: "string" },
    "dcgm-model-label": { type: "string" },
    "reject-continuation": { type: "boolean" },
  },
  async run(args) {
    const { fixed, live, host, port, dcgmPort } = buildConfig(args);
    const log = initLogger({ role: "sim-engine" });
    const sim = new SimServer(fixed, live);
    const urls = sim.listen(host, port, dcgmPort);
    logListening(log, "api", urls.api);
    if (urls.dcgm) logListening(log, "dcgm", urls.dcgm);
    log.info({ models: fixed.models, max_num_seqs: fixed.maxNumSeqs, num_gpu_blocks: fixed.numGpuBlocks, itl_ms: live.itlMs, metrics_flavor: fixed.metricsFlavor }, "sim-engine ready");
    await new Promise<void>((resolve) => {
      let stopping = false;
      // Handlers stay installed: a second signal (e.g. the re-exec wrapper forwarding the group's SIGTERM) must not kill us mid-shutdown.
      const onSignal = (sig: NodeJS.Signals) => {
        if (stopping) return;
        stopping = true;
        log.info({ signal: sig }, "shutting down");
        void sim.close().then(resolve, resolve);
      };
      process.on("SIGINT", onSignal);
      process.on("SIGTERM", onSignal);
    });
    await flushLogger();
    return 0;
  },
};
