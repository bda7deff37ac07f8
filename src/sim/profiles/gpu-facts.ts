/** Public figures of the GPUs the sim-engine can stand in for: memory, bandwidth, dense TFLOPs per dtype, power, DCGM name. */

export type Dtype = "bf16" | "fp8";

export interface GpuFacts {
  /** The name `--gpu` takes. */
  id: string;
  /** As nvidia-smi and dcgm-exporter's `modelName` label spell it. */
  dcgmName: string;
  /** Total framebuffer as nvidia-smi reports it (MiB). */
  memoryMiB: number;
  /** Framebuffer the driver keeps for itself (DCGM_FI_DEV_FB_RESERVED, MiB). */
  reservedMiB: number;
  /** Peak HBM/GDDR bandwidth, GB/s (10^9 bytes). */
  bandwidthGBs: number;
  /** Dense (no 2:4 sparsity) tensor-core peak, TFLOP/s; fp8 absent where the GPU has no fp8 tensor cores. */
  denseTflops: { bf16: number; fp8?: number };
  /** Per-direction GPU-to-GPU bandwidth for tensor parallelism, GB/s (NVLink, else PCIe). */
  interconnectGBs: number;
  maxPowerW: number;
  idlePowerW: number;
  computeCap: string;
  source: string;
}

/**
 * Figures from NVIDIA's datasheets (dense tensor TFLOPs are half the
 * "with sparsity" figures); nvidia-smi totals from real captures where we
 * have them (`../shared/fixtures/nvidia-smi-capture__*`: H100 81,559 MiB,
 * H200 143,771 MiB, reserved 479 MiB on the H100).
 */
export const GPUS: readonly GpuFacts[] = [
  {
    id: "a100-40gb",
    dcgmName: "NVIDIA A100-SXM4-40GB",
    memoryMiB: 40_960,
    reservedMiB: 420,
    bandwidthGBs: 1_555,
    denseTflops: { bf16: 312 },
    interconnectGBs: 300,
    maxPowerW: 400,
    idlePowerW: 55,
    computeCap: "8.0",
    source: "NVIDIA A100 Tensor Core GPU datasheet (SXM4 40GB: 1,555 GB/s, BF16 312 TFLOPS dense; no FP8)",
  },
  {
    id: "a100-80gb",
    dcgmName: "NVIDIA A100-SXM4-80GB",
    memoryMiB: 81_920,
    reservedMiB: 455,
    bandwidthGBs: 2_039,
    denseTflops: { bf16: 312 },
    interconnectGBs: 300,
    maxPowerW: 400,
    idlePowerW: 60,
    computeCap: "8.0",
    source: "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB: 2,039 GB/s, BF16 312 TFLOPS dense; no FP8)",
  },
  {
    id: "h100",
    dcgmName: "NVIDIA H100 80GB HBM3",
    memoryMiB: 81_559,
    reservedMiB: 479,
    bandwidthGBs: 3_350,
    denseTflops: { bf16: 989, fp8: 1_979 },
    interconnectGBs: 450,
    maxPowerW: 700,
    idlePowerW: 70,
    computeCap: "9.0",
    source: "NVIDIA H100 Tensor Core GPU datasheet (SXM5: 3.35 TB/s, BF16 989 / FP8 1,979 TFLOPS dense, NVLink 900 GB/s bidirectional)",
  },
  {
    id: "h200",
    dcgmName: "NVIDIA H200",
    memoryMiB: 143_771,
    reservedMiB: 559,
    bandwidthGBs: 4_800,
    denseTflops: { bf16: 989, fp8: 1_979 },
    interconnectGBs: 450,
    maxPowerW: 700,
    idlePowerW: 75,
    computeCap: "9.0",
    source: "NVIDIA H200 Tensor Core GPU datasheet (SXM: 141 GB, 4.8 TB/s, BF16 989 / FP8 1,979 TFLOPS dense)",
  },
  {
    id: "l4",
    dcgmName: "NVIDIA L4",
    memoryMiB: 23_034,
    reservedMiB: 340,
    bandwidthGBs: 300,
    denseTflops: { bf16: 121, fp8: 242.5 },
    interconnectGBs: 32,
    maxPowerW: 72,
    idlePowerW: 16,
    computeCap: "8.9",
    source: "NVIDIA L4 Tensor Core GPU datasheet (24 GB GDDR6, 300 GB/s, BF16 121 / FP8 242.5 TFLOPS dense, PCIe Gen4 x16)",
  },
  {
    id: "l40s",
    dcgmName: "NVIDIA L40S",
    memoryMiB: 46_068,
    reservedMiB: 400,
    bandwidthGBs: 864,
    denseTflops: { bf16: 362, fp8: 733 },
    interconnectGBs: 32,
    maxPowerW: 350,
    idlePowerW: 35,
    computeCap: "8.9",
    source: "NVIDIA L40S datasheet (48 GB GDDR6, 864 GB/s, BF16 362 / FP8 733 TFLOPS dense, PCIe Gen4 x16)",
  },
  {
    id: "b200",
    dcgmName: "NVIDIA B200",
    memoryMiB: 183_359,
    reservedMiB: 600,
    bandwidthGBs: 8_000,
    denseTflops: { bf16: 2_250, fp8: 4_500 },
    interconnectGBs: 900,
    maxPowerW: 1_000,
    idlePowerW: 120,
    computeCap: "10.0",
    source: "NVIDIA HGX B200 specifications (179 GiB HBM3e, 8 TB/s, BF16 2,250 / FP8 4,500 TFLOPS dense, NVLink 5 1.8 TB/s bidirectional)",
  },
];

export function findGpu(id: string): GpuFacts | undefined {
  const key = id.toLowerCase();
  return GPUS.find((g) => g.id === key || g.dcgmName.toLowerCase() === key);
}

/** The GPU whose DCGM name is `name`, if any (for `--gpu-model`). */
export function gpuByDcgmName(name: string): GpuFacts | undefined {
  return GPUS.find((g) => g.dcgmName === name);
}

export const MIB = 1024 * 1024;
export const GIB = 1024 * MIB;
