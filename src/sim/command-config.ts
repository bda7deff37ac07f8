/**
 * `llmgw sim-engine`'s flags → the engine's fixed and live settings. A
 * profile (`--profile`, or `--gpu`/`--arch`/`--tp`/`--dtype`, or the default
 * H100 × Llama-3.1-8B) gives vLLM's defaults for that hardware and the
 * derived step model; every explicit flag overrides its part.
 */
import { boolFlag, numberFlag, type ParsedArgs, stringFlag, stringListFlag, UsageError } from "../shared/flags.ts";
import { randomSeed } from "../shared/seeded.ts";
import {
  DEFAULT_BATCH_SLOWDOWN,
  DEFAULT_EMBEDDING_DIM,
  DEFAULT_PREFILL_MS_PER_TOKEN,
  DEFAULT_PREFILL_OVERHEAD_MS,
  DEFAULT_SIM_PORT,
  METRICS_FLAVORS,
  type MetricsFlavor,
  newGpuFaultState,
  type SimLiveConfig,
  type SimStaticConfig,
} from "./config.ts";
import { parseFaultList } from "./faults.ts";
import { parseKvEventsConfig, type SimKvEventsConfig } from "./kv-events-config.ts";
import { LoraConfigError, loraSettings, type SimLoraSettings } from "./lora/lora-config.ts";
import { FRONTEND_JITTER_MS, STEP_NOISE_CV } from "./noise.ts";
import { DEFAULT_LENGTH_DISTRIBUTION, type LengthDistribution, parseLengthDistribution } from "./output-length.ts";
import { resolveProfile } from "./profiles/catalog.ts";
import type { Dtype } from "./profiles/gpu-facts.ts";
import { KV_CACHE_DTYPES, type KvCacheDtype, ProfileError } from "./profiles/profile.ts";
import { loneDecodeMs } from "./step-time.ts";
import { blockHashRoot } from "./tokens.ts";

interface SimCommandConfig {
  fixed: SimStaticConfig;
  live: SimLiveConfig;
  host: string;
  port: number;
  dcgmPort: number | undefined;
}

function has(args: ParsedArgs, name: string): boolean {
  return args.values[name] !== undefined;
}

function dtypeFlag(args: ParsedArgs): Dtype | undefined {
  const d = stringFlag(args, "dtype");
  if (d === undefined || d === "bf16" || d === "fp8") return d;
  throw new UsageError(`--dtype: expected bf16 or fp8, got '${d}'`);
}

function kvCacheDtypeFlag(args: ParsedArgs): KvCacheDtype | undefined {
  const d = stringFlag(args, "kv-cache-dtype");
  if (d === undefined) return undefined;
  const known = KV_CACHE_DTYPES.find((k) => k === d);
  if (known === undefined) throw new UsageError(`--kv-cache-dtype: expected ${KV_CACHE_DTYPES.join(", ")}, got '${d}'`);
  return known;
}

function lengthDistribution(args: ParsedArgs): { outputLen: number; dist: LengthDistribution } {
  if (has(args, "output-len") && has(args, "output-len-dist"))
    throw new UsageError("--output-len and --output-len-dist: give one (--output-len N is --output-len-dist fixed:N)");
  if (has(args, "output-len")) {
    const n = numberFlag(args, "output-len", 1, { min: 1, integer: true });
    return { outputLen: n, dist: { kind: "fixed", tokens: n } };
  }
  const spec = stringFlag(args, "output-len-dist");
  let dist = DEFAULT_LENGTH_DISTRIBUTION;
  if (spec !== undefined) {
    try {
      dist = parseLengthDistribution(spec);
    } catch (err) {
      throw new UsageError(`--output-len-dist: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return { outputLen: dist.kind === "fixed" ? dist.tokens : dist.kind === "lognormal" ? Math.round(dist.median) : dist.min, dist };
}

function kvEventsFlag(args: ParsedArgs): SimKvEventsConfig | undefined {
  const json = stringFlag(args, "kv-events-config");
  if (json === undefined) return undefined;
  try {
    return parseKvEventsConfig(json);
  } catch (err) {
    throw new UsageError(`--kv-events-config: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function loraFromFlags(args: ParsedArgs, env: Record<string, string | undefined>, hw: Parameters<typeof loraSettings>[2]): SimLoraSettings | undefined {
  const optInt = (name: string, min: number) => (has(args, name) ? numberFlag(args, name, min, { min, integer: true }) : undefined);
  const optMs = (name: string) => (has(args, name) ? numberFlag(args, name, 0, { min: 0 }) : undefined);
  try {
    return loraSettings(
      {
        enableLora: boolFlag(args, "enable-lora"),
        modules: stringListFlag(args, "lora-modules"),
        maxLoras: optInt("max-loras", 1),
        maxLoraRank: optInt("max-lora-rank", 1),
        maxCpuLoras: optInt("max-cpu-loras", 1),
        swapMs: optMs("lora-swap-ms"),
        diskMs: optMs("lora-disk-ms"),
      },
      env,
      hw,
    );
  } catch (err) {
    if (err instanceof LoraConfigError) throw new UsageError(err.message);
    throw err;
  }
}

/** vLLM takes --api-key, else the VLLM_API_KEY variable (which keeps the key out of the process list). */
function apiKeyFlag(args: ParsedArgs, env: Record<string, string | undefined>): { apiKey?: string } {
  const key = stringFlag(args, "api-key") ?? env.VLLM_API_KEY;
  if (key === undefined || key === "") return {};
  return { apiKey: key };
}

export function buildSimConfig(args: ParsedArgs, env: Record<string, string | undefined> = process.env): SimCommandConfig {
  const models = stringListFlag(args, "model");
  if (models.length === 0) throw new UsageError("--model is required");
  const flavor = stringFlag(args, "metrics-flavor") ?? "vllm-v1";
  if (!METRICS_FLAVORS.includes(flavor as MetricsFlavor)) throw new UsageError(`--metrics-flavor: expected ${METRICS_FLAVORS.join(", ")}, got '${flavor}'`);

  let resolved: ReturnType<typeof resolveProfile>;
  try {
    resolved = resolveProfile({
      profile: stringFlag(args, "profile"),
      gpu: stringFlag(args, "gpu"),
      arch: stringFlag(args, "arch"),
      tp: has(args, "tp") ? numberFlag(args, "tp", 1, { min: 1, max: 8, integer: true }) : undefined,
      dtype: dtypeFlag(args),
      kvCacheDtype: kvCacheDtypeFlag(args),
      gpuMemoryUtilization: has(args, "gpu-memory-utilization") ? numberFlag(args, "gpu-memory-utilization", 0.9, { min: 0.05, max: 1 }) : undefined,
    });
  } catch (err) {
    if (err instanceof ProfileError) throw new UsageError(err.message);
    throw err;
  }
  const p = resolved.profile;

  const numGpuBlocks = numberFlag(args, "num-gpu-blocks", p.numGpuBlocks, { min: 1, integer: true });
  const blockSize = numberFlag(args, "block-size", p.blockSize, { min: 1, max: 1024, integer: true });
  const capacity = numGpuBlocks * blockSize;
  const maxModelLen = numberFlag(args, "max-model-len", Math.min(p.maxModelLen, capacity), { min: 2, integer: true });
  if (maxModelLen > capacity)
    throw new UsageError(`--max-model-len ${maxModelLen} exceeds the KV cache (${numGpuBlocks} blocks × ${blockSize} = ${capacity} tokens)`);
  const gpus = numberFlag(args, "gpus", 0, { min: 0, max: 64, integer: true });
  const dcgmPort = has(args, "dcgm-port") ? numberFlag(args, "dcgm-port", 0, { min: 0, max: 65535, integer: true }) : undefined;
  if (dcgmPort !== undefined && gpus === 0) throw new UsageError("--dcgm-port needs --gpus N (N ≥ 1)");
  const modelLabel = stringFlag(args, "dcgm-model-label") ?? "modelName";
  if (modelLabel !== "DCGM_FI_DEV_NAME" && modelLabel !== "modelName")
    throw new UsageError(`--dcgm-model-label: expected DCGM_FI_DEV_NAME or modelName, got '${modelLabel}'`);
  let faultTypes: ReturnType<typeof parseFaultList>;
  try {
    faultTypes = parseFaultList(stringListFlag(args, "fault-types"));
  } catch (err) {
    throw new UsageError(`--fault-types: ${err instanceof Error ? err.message : String(err)}`);
  }
  const { outputLen, dist } = lengthDistribution(args);
  const gpuModelFlag = stringFlag(args, "gpu-model");
  const startupAnswers = stringFlag(args, "startup-answers") ?? "held";
  if (startupAnswers !== "held" && startupAnswers !== "split") throw new UsageError(`--startup-answers: expected held or split, got '${startupAnswers}'`);
  const fixed: SimStaticConfig = Object.freeze({
    models: Object.freeze([...new Set(models)]),
    maxNumSeqs: numberFlag(args, "max-num-seqs", p.maxNumSeqs, { min: 1, integer: true }),
    maxNumBatchedTokens: numberFlag(args, "max-num-batched-tokens", p.maxNumBatchedTokens, { min: 1, integer: true }),
    numGpuBlocks,
    blockSize,
    maxModelLen,
    outputLen,
    outputLenDist: dist,
    embeddingDim: numberFlag(args, "embedding-dim", DEFAULT_EMBEDDING_DIM, { min: 1, max: 65536, integer: true }),
    startupMs: numberFlag(args, "startup-ms", 0, { min: 0 }),
    startupAnswers,
    metricsFlavor: flavor as MetricsFlavor,
    gpus,
    gpuModel: gpuModelFlag ?? p.gpu.dcgmName,
    dcgmModelLabel: modelLabel,
    rejectContinuation: boolFlag(args, "reject-continuation"),
    noMessagesApi: boolFlag(args, "no-messages-api"),
    enablePromptTokensDetails: boolFlag(args, "enable-prompt-tokens-details"),
    timeScale: numberFlag(args, "time-scale", 1, { min: 0.001, max: 10_000 }),
    // A GPU named by --gpu-model that is not the profile's keeps vLLM's 0.9 of its own memory.
    reservedMiB: gpuModelFlag === undefined || gpuModelFlag === p.gpu.dcgmName ? p.reservedMiB : undefined,
    profile: resolved.name,
    kvCacheDtype: p.kvCacheDtype,
    kvEvents: kvEventsFlag(args),
    asyncScheduling: !boolFlag(args, "no-async-scheduling"),
    blockHashRoot: blockHashRoot(env.PYTHONHASHSEED),
    // Drawn here when not given, so /sim/state and the startup log can name it and a run can be drawn again.
    seed: numberFlag(args, "seed", randomSeed(), { min: 0, max: 4_294_967_295, integer: true }),
    lora: loraFromFlags(args, env, { arch: p.arch, gpuId: p.gpu.id, tp: p.tp }),
    ...apiKeyFlag(args, env),
  });
  const flatDecode = has(args, "batch-slowdown");
  const flatPrefill = has(args, "prefill-overhead-ms") || has(args, "prefill-ms-per-token");
  const live: SimLiveConfig = {
    itlMs: numberFlag(args, "itl-ms", loneDecodeMs(p.cost), { min: 0 }),
    prefillOverheadMs: numberFlag(args, "prefill-overhead-ms", DEFAULT_PREFILL_OVERHEAD_MS, { min: 0 }),
    prefillMsPerToken: numberFlag(args, "prefill-ms-per-token", DEFAULT_PREFILL_MS_PER_TOKEN, { min: 0 }),
    jitter: numberFlag(args, "jitter", STEP_NOISE_CV, { min: 0, max: 1 }),
    frontendJitterMs: numberFlag(args, "frontend-jitter-ms", FRONTEND_JITTER_MS, { min: 0, max: 600_000 }),
    batchSlowdown: numberFlag(args, "batch-slowdown", DEFAULT_BATCH_SLOWDOWN, { min: 0 }),
    faultRate: numberFlag(args, "fault-rate", 0, { min: 0, max: 1 }),
    faultTypes,
    dead: false,
    dcgmDead: false,
    gpus: Array.from({ length: gpus }, newGpuFaultState),
    derived: p.cost,
    flatDecode,
    flatPrefill,
    frontend: {
      latencyMs: numberFlag(args, "frontend-latency-ms", p.frontend.latencyMs, { min: 0 }),
      serviceMs: numberFlag(args, "frontend-service-ms", p.frontend.serviceMs, { min: 0 }),
    },
    frontendExplicit: has(args, "frontend-latency-ms") || has(args, "frontend-service-ms"),
  };
  const port = numberFlag(args, "port", DEFAULT_SIM_PORT, { min: 0, max: 65535, integer: true });
  return { fixed, live, host: stringFlag(args, "host") ?? "127.0.0.1", port, dcgmPort };
}
