/**
 * A sim-engine profile derived from public facts (pure): a GPU's memory,
 * bandwidth and FLOPs, a model's config.json, the tensor-parallel degree and
 * dtype, and the fitted efficiency constants. It yields what vLLM would
 * configure on that hardware (max_num_seqs, max_num_batched_tokens, KV
 * blocks, max_model_len) and the step cost model.
 */
import type { Frontend, StepCostModel } from "../step-time.ts";
import { type EfficiencyConstants, FITTED } from "./efficiency.ts";
import { type Dtype, GIB, type GpuFacts, MIB } from "./gpu-facts.ts";
import type { ModelArch } from "./model-arch.ts";
import {
  activeParams,
  allReducesPerToken,
  attentionLayers,
  denseParams,
  expertParams,
  kvBytesPerTokenPerGpu,
  totalParams,
  widestIntermediateSize,
} from "./model-facts.ts";
import { profileRunPeak } from "./profile-run-memory.ts";

const BLOCK_SIZE_TOKENS = 16;
const DEFAULT_GPU_MEMORY_UTILIZATION = 0.9;
/** Hidden states travel in the model dtype (bf16). */
const ACTIVATION_BYTES = 2;

/**
 * vLLM's --kv-cache-dtype (vllm/config/cache.py, CacheDType; the values the
 * sim takes): "auto" follows the model's activation dtype (bf16, also for
 * fp8 weights); "fp8" (= fp8_e4m3 on CUDA) and fp8_e5m2 store each K and V
 * element in one byte (vllm/utils/torch_utils.py maps all three to
 * torch.uint8), which halves the KV page (kv_cache_interface.py:
 * page_size_bytes = 2 × block_size × kv_heads × head_size × dtype size), so
 * the same memory holds twice the blocks and attention reads half the bytes.
 */
export type KvCacheDtype = "auto" | "fp8" | "fp8_e4m3" | "fp8_e5m2";
export const KV_CACHE_DTYPES: readonly KvCacheDtype[] = ["auto", "fp8", "fp8_e4m3", "fp8_e5m2"];

function kvDtypeBytes(d: KvCacheDtype): number {
  return d === "auto" ? 2 : 1;
}

interface ProfileInput {
  gpu: GpuFacts;
  arch: ModelArch;
  tp: number;
  dtype: Dtype;
  /** Absent: "auto". */
  kvCacheDtype?: KvCacheDtype;
  gpuMemoryUtilization?: number;
  maxModelLen?: number;
  /** The engine's --max-num-seqs and --max-num-batched-tokens where a run set them; absent: vLLM's defaults for the GPU. */
  maxNumSeqs?: number;
  maxNumBatchedTokens?: number;
  efficiency?: EfficiencyConstants;
}

export interface DerivedProfile {
  gpu: GpuFacts;
  arch: ModelArch;
  tp: number;
  dtype: Dtype;
  kvCacheDtype: KvCacheDtype;
  gpuMemoryUtilization: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  numGpuBlocks: number;
  blockSize: number;
  maxModelLen: number;
  /** Per GPU. */
  weightBytes: number;
  kvBytesPerTokenPerGpu: number;
  /** Framebuffer vLLM holds per GPU from start (gpu_memory_utilization × total), MiB. */
  reservedMiB: number;
  frontend: Frontend;
  cost: StepCostModel;
}

export class ProfileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProfileError";
  }
}

/**
 * vLLM's scheduler defaults for the OpenAI server by device
 * (vllm/engine/arg_utils.py, EngineArgs._set_default_args / get_batch_defaults):
 * ≥ 70 GiB and not an A100 → max_num_batched_tokens 8192, max_num_seqs 1024;
 * otherwise 2048 and 256 (the A100 exception: a larger budget cost it throughput, vLLM PR #17885).
 */
export function schedulerDefaults(gpu: GpuFacts): { maxNumSeqs: number; maxNumBatchedTokens: number } {
  const large = gpu.memoryMiB * MIB >= 70 * GIB && !gpu.dcgmName.toLowerCase().includes("a100");
  return large ? { maxNumSeqs: 1024, maxNumBatchedTokens: 8192 } : { maxNumSeqs: 256, maxNumBatchedTokens: 2048 };
}

function peakTflops(gpu: GpuFacts, dtype: Dtype): number {
  // fp8 weights on a GPU without fp8 tensor cores run as W8A16 (Marlin): bf16 math, 1-byte weights.
  return dtype === "fp8" ? (gpu.denseTflops.fp8 ?? gpu.denseTflops.bf16) : gpu.denseTflops.bf16;
}

export function deriveProfile(input: ProfileInput): DerivedProfile {
  const { gpu, arch, tp, dtype } = input;
  const eff = input.efficiency ?? FITTED;
  const gmu = input.gpuMemoryUtilization ?? DEFAULT_GPU_MEMORY_UTILIZATION;
  if (!Number.isInteger(tp) || tp < 1 || tp > 8) throw new ProfileError(`--tp: expected 1 to 8, got ${tp}`);
  if (arch.attentionHeads % tp !== 0) throw new ProfileError(`--tp ${tp}: ${arch.id} has ${arch.attentionHeads} attention heads, not divisible by ${tp}`);
  const defaults = schedulerDefaults(gpu);
  const maxNumSeqs = input.maxNumSeqs ?? defaults.maxNumSeqs;
  const maxNumBatchedTokens = input.maxNumBatchedTokens ?? defaults.maxNumBatchedTokens;
  const weightBytesPerParam = dtype === "fp8" ? 1 : 2;
  const weightBytes = (totalParams(arch) * weightBytesPerParam) / tp;
  const kvCacheDtype = input.kvCacheDtype ?? "auto";
  const kvPerGpu = kvBytesPerTokenPerGpu(arch, kvDtypeBytes(kvCacheDtype), tp);
  // vLLM's profile run (gpu_worker.determine_available_memory,
  // utils memory_profiling): the budget is gpu_memory_utilization × total;
  // the weights (model_memory_usage), the torch peak of the profile run above
  // them (torch_peak_increase, profile-run-memory.ts) and the non-torch
  // memory that grew since the worker's first snapshot (non_torch_increase)
  // come off it; the rest is KV cache in blocks of 16 tokens
  // (kv_cache_utils.get_num_blocks: available // page size // layers).
  const budget = gpu.memoryMiB * MIB * gmu;
  const { peakBytes } = profileRunPeak({ arch, tp, maxNumSeqs, maxNumBatchedTokens });
  const available = budget - weightBytes - peakBytes - eff.nonTorchGiB * GIB;
  const numGpuBlocks = Math.floor(available / (kvPerGpu * BLOCK_SIZE_TOKENS));
  if (numGpuBlocks < 1) {
    throw new ProfileError(
      `${arch.id} (${dtype}) does not fit ${tp} × ${gpu.id}: ${(weightBytes / GIB).toFixed(1)} GiB of weights per GPU against a budget of ${(budget / GIB).toFixed(1)} GiB (gpu_memory_utilization ${gmu}); try a larger --tp or --dtype fp8`,
    );
  }
  const capacity = numGpuBlocks * BLOCK_SIZE_TOKENS;
  const maxModelLen = Math.min(input.maxModelLen ?? arch.maxPositionEmbeddings, capacity);
  const hiddenBytes = arch.hiddenSize * ACTIVATION_BYTES;
  const allReduces = allReducesPerToken(arch);
  // The expert MLPs a token is routed to: priced apart, at the rate their shape reaches (step-time.ts).
  const expertFlopParams = arch.experts ? (expertParams(arch) * arch.experts.perToken) / arch.experts.count : 0;
  const cost: StepCostModel = {
    weightBytes: (denseParams(arch) * weightBytesPerParam) / tp,
    kvBytesPerToken: kvPerGpu,
    flopsPerToken: (2 * (activeParams(arch) - expertFlopParams)) / tp,
    attnFlopsPerPair: (4 * attentionLayers(arch) * arch.attentionHeads * arch.headDim) / tp,
    bytesPerMs: (gpu.bandwidthGBs * 1e9 * eff.bandwidthEfficiency) / 1000,
    flopsPerMs: (peakTflops(gpu, dtype) * 1e12 * eff.computeEfficiency) / 1000,
    stepOverheadMs: eff.stepOverheadMs,
    perSeqOverheadMs: eff.perSeqOverheadMs,
    // Two all-reduces per layer (after attention and after the MLP; a pruned layer without one skips its), each a ring of 2(tp-1) hops moving 2(tp-1)/tp of the activations.
    commMsPerStep: allReduces * 2 * (tp - 1) * eff.allReduceHopMs,
    commMsPerToken: tp > 1 ? (allReduces * hiddenBytes * ((2 * (tp - 1)) / tp)) / ((gpu.interconnectGBs * 1e9) / 1000) : 0,
    // Tensor parallelism shards every expert across the group (vLLM's default without --enable-expert-parallel).
    ...(arch.experts
      ? {
          experts: {
            bytes: (expertParams(arch) * weightBytesPerParam) / tp,
            ...arch.experts,
            flopsPerToken: (2 * expertFlopParams) / tp,
            columnsPerGpu: widestIntermediateSize(arch) / tp,
            pairColumns: eff.expertPairColumns,
          },
        }
      : {}),
  };
  return {
    gpu,
    arch,
    tp,
    dtype,
    kvCacheDtype,
    gpuMemoryUtilization: gmu,
    maxNumSeqs,
    maxNumBatchedTokens,
    numGpuBlocks,
    blockSize: BLOCK_SIZE_TOKENS,
    maxModelLen,
    weightBytes,
    kvBytesPerTokenPerGpu: kvPerGpu,
    reservedMiB: Math.round(gpu.memoryMiB * gmu),
    frontend: { latencyMs: eff.frontendLatencyMs, serviceMs: eff.frontendServiceMs },
    cost,
  };
}
