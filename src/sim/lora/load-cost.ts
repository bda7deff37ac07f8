/**
 * What loading a LoRA adapter costs the engine (pure), from the adapter's
 * size and the links it crosses. vLLM keeps registered adapters in an LRU of
 * host memory (`max_cpu_loras`, pinned tensors: vllm/lora/models.py) and
 * copies one into a GPU slot (`max_loras` slots) when a step's batch needs
 * it and it is not there: `set_active_loras` runs before the forward pass,
 * so that step waits for the copy. An adapter not in host memory any more is
 * first read from disk (safetensors) — also on the engine's loop.
 *
 * No published table of per-load latencies for vLLM was found (searches of
 * vLLM, S-LoRA, Punica, CaraServe and SGLang material turned up relative
 * figures only: vllm-project/vllm#31317 cut CPU→GPU LoRA copy time ~40% by
 * using pinned contiguous memory; sgl-project/sglang#13349 saw median TTFT go
 * from 39.65 ms to 6,278 ms once 16 adapters competed for 8 slots, which is
 * the waiting the scheduler's max_loras rule produces, not the copy). So the
 * cost is derived, and every figure below is an estimate a flag overrides:
 *
 *   bytes     = rank × Σ over the layers' adapted projections of (in + out) × 2 B ÷ tp
 *   swap ms   = bytes ÷ host-link bandwidth + tensors × per-copy overhead
 *   disk ms   = fixed + bytes ÷ disk bandwidth           (only when not in host memory)
 *
 * Llama-3.1-8B at rank 16 is 83.9 MB: 6.1 ms to swap in on an H100 (PCIe
 * Gen5), 7.8 ms on an A100 (Gen4), and 62 ms more when read from disk.
 */
import { decoderLayers, type ModelArch } from "../profiles/model-arch.ts";

/** PCIe x16 per direction, GB/s (10^9 B): Gen4 31.5, Gen5 63 (PCI-SIG); the GPU's host link per NVIDIA's datasheets. */
const PCIE_GEN4_GBS = 31.5;
const PCIE_GEN5_GBS = 63;
/** A100 SXM4 (PCIe Gen4, "64 GB/s" bidirectional), H100 SXM5 and H200 (Gen5, "128 GB/s"), B200 (Gen5), L4 and L40S (Gen4 x16). */
const HOST_LINK_GBS: Readonly<Record<string, number>> = {
  "a100-40gb": PCIE_GEN4_GBS,
  "a100-80gb": PCIE_GEN4_GBS,
  h100: PCIE_GEN5_GBS,
  h200: PCIE_GEN5_GBS,
  b200: PCIE_GEN5_GBS,
  l4: PCIE_GEN4_GBS,
  l40s: PCIE_GEN4_GBS,
};
/** Share of the link a pinned host-to-device copy reaches (CUDA's bandwidthTest typically shows ~80 %); an estimate. */
const HOST_LINK_EFFICIENCY = 0.8;
/** Per tensor copied (lora_a and lora_b of each projection of each layer): a cudaMemcpyAsync launch and the Python around it, ms; an estimate. */
const PER_TENSOR_COPY_MS = 0.01;
/** Reading an adapter from disk: opening the checkpoint, building its tensors, pinning them, ms; an estimate. */
const DISK_LOAD_FIXED_MS = 20;
/** safetensors read from an NVMe drive or the page cache, GB/s; an estimate. */
const DISK_READ_GBS = 2;
/** The projections PEFT's "all-linear" adapts in a Llama-style layer: q, k, v, o of its attention, gate, up, down of its MLP. */
const ATTENTION_PROJECTIONS = 4;
const MLP_PROJECTIONS = 3;
const ADAPTER_DTYPE_BYTES = 2;

/** What the cost of one adapter follows from, fixed for an engine. */
export interface AdapterCostModel {
  /** Adapted projections over every layer (a pruned layer without attention or MLP has none of its). */
  projections: number;
  /** Σ over every layer's adapted projections of (input + output) features. */
  projectionFeatures: number;
  tp: number;
  /** Effective host-to-device bandwidth, bytes per ms. */
  hostLinkBytesPerMs: number;
  diskBytesPerMs: number;
  /** Flags that fix the costs instead (sim-only: --lora-swap-ms, --lora-disk-ms). */
  swapMsOverride?: number;
  diskMsOverride?: number;
}

export function adapterCostModel(arch: ModelArch, gpuId: string, tp: number, overrides: { swapMs?: number; diskMs?: number } = {}): AdapterCostModel {
  const h = arch.hiddenSize;
  const q = arch.attentionHeads * arch.headDim;
  let projections = 0;
  let features = 0;
  for (const layer of decoderLayers(arch)) {
    const kv = layer.kvHeads * arch.headDim;
    const i = layer.intermediateSize;
    // q (h→q), k and v (h→kv), o (q→h); gate and up (h→i), down (i→h).
    if (layer.kvHeads > 0) {
      projections += ATTENTION_PROJECTIONS;
      features += h + q + 2 * (h + kv) + q + h;
    }
    if (i > 0) {
      projections += MLP_PROJECTIONS;
      features += 2 * (h + i) + i + h;
    }
  }
  const link = (HOST_LINK_GBS[gpuId] ?? PCIE_GEN4_GBS) * HOST_LINK_EFFICIENCY;
  return {
    projections,
    projectionFeatures: features,
    tp,
    hostLinkBytesPerMs: (link * 1e9) / 1000,
    diskBytesPerMs: (DISK_READ_GBS * 1e9) / 1000,
    ...(overrides.swapMs !== undefined ? { swapMsOverride: overrides.swapMs } : {}),
    ...(overrides.diskMs !== undefined ? { diskMsOverride: overrides.diskMs } : {}),
  };
}

/** Bytes of one adapter's weights per GPU (each tensor-parallel rank holds its shard). */
export function adapterBytes(m: AdapterCostModel, rank: number): number {
  return (rank * m.projectionFeatures * ADAPTER_DTYPE_BYTES) / m.tp;
}

/** ms to copy an adapter from host memory into a GPU slot. */
export function swapMs(m: AdapterCostModel, rank: number): number {
  if (m.swapMsOverride !== undefined) return m.swapMsOverride;
  const tensors = 2 * m.projections;
  return adapterBytes(m, rank) / m.hostLinkBytesPerMs + tensors * PER_TENSOR_COPY_MS;
}

/** ms to read an adapter from disk into host memory. */
export function diskLoadMs(m: AdapterCostModel, rank: number): number {
  if (m.diskMsOverride !== undefined) return m.diskMsOverride;
  return DISK_LOAD_FIXED_MS + adapterBytes(m, rank) / m.diskBytesPerMs;
}
