/**
 * Simulated GPUs as dcgm-exporter shows them: its default counter set
 * (etc/default-counters.csv, `../shared/fixtures/dcgm-exporter-default-counters.csv`)
 * with its HELP strings and types, and its labels in its order
 * (internal/pkg/rendermetrics/render_metrics.go: gpu, UUID, pci_bus_id,
 * device, modelName, hostname, then label fields such as
 * DCGM_FI_DRIVER_VERSION). Values follow what vLLM does to a GPU:
 * utilisation is the fraction of the last second in which a step ran (NVML:
 * "percent of time … during which one or more kernels was executing"), so
 * one decoding request reads ~100 %; the framebuffer is flat at what vLLM
 * reserved at start (gpu_memory_utilization × memory), whatever the KV
 * cache holds. Faults set through POST /sim/config come on top (a GPU whose
 * utilisation is not reported, or is pinned to a figure).
 *
 * Beyond the default set it exports the four ECC counters (commented out in
 * that CSV; the gateway's fault detection reads them). The promtool-clean
 * variant (`--dcgm-model-label DCGM_FI_DEV_NAME`) puts the GPU name in the
 * DCGM_FI_DEV_NAME label (camelCase `modelName` draws a promtool complaint)
 * declares the counters whose names do not end in `_total` as gauges, and
 * leaves out DCGM_FI_DEV_PCIE_REPLAY_COUNTER (promtool rejects "counter" in a name).
 */
import type { GpuFaultState } from "./config.ts";
import { GPUS, gpuByDcgmName } from "./profiles/gpu-facts.ts";
import { type Labels, PromWriter } from "./prom-writer.ts";

interface GpuLoad {
  /** Fraction of the recent window in which a step ran, 0..1. */
  utilization: number;
  /** Of a step, the share its matmuls keep the tensor cores busy, 0..1 (absent: unknown). */
  computeShare?: number;
  /** Of a step, the share its memory reads keep DRAM busy, 0..1 (absent: unknown). */
  memoryShare?: number;
}

/** Which label carries the GPU model name, and with it whether the text is dcgm-exporter's own or promtool-clean. */
type DcgmModelLabel = "DCGM_FI_DEV_NAME" | "modelName";

interface GpuSpec {
  model: string;
  memoryMiB: number;
  /** The driver's own share (DCGM_FI_DEV_FB_RESERVED). */
  driverReservedMiB: number;
  maxPowerW: number;
  idlePowerW: number;
}

export function gpuSpec(model: string): GpuSpec {
  const g = gpuByDcgmName(model) ?? GPUS.find((x) => x.id === "h100")!;
  return { model, memoryMiB: g.memoryMiB, driverReservedMiB: g.reservedMiB, maxPowerW: g.maxPowerW, idlePowerW: g.idlePowerW };
}

const DRIVER_VERSION = "570.133.20";
/** vLLM's default share of GPU memory, when the engine does not say what it reserved. */
const DEFAULT_RESERVED_SHARE = 0.9;

export class SimGpus {
  private energyMj: number[];
  private lastAt: number;
  /** What the engine holds per GPU from start, MiB. */
  readonly usedMiB: number;

  constructor(
    readonly spec: GpuSpec,
    readonly count: number,
    readonly hostname: string,
    private readonly seed: string,
    now: number,
    private readonly modelLabel: DcgmModelLabel = "modelName",
    reservedMiB?: number,
  ) {
    this.energyMj = new Array<number>(count).fill(0);
    this.lastAt = now;
    this.usedMiB = Math.min(spec.memoryMiB - spec.driverReservedMiB, reservedMiB ?? Math.round(spec.memoryMiB * DEFAULT_RESERVED_SHARE));
  }

  uuid(i: number): string {
    const h = Bun.hash(`${this.seed}/${i}`).toString(16).padStart(16, "0").slice(-16);
    const t = Bun.hash(`${this.seed}#${i}`).toString(16).padStart(16, "0").slice(-12);
    return `GPU-${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${t.slice(0, 4)}-${t}`.slice(0, 40);
  }

  /** As nvidia-smi prints it: domain:bus:device.function. */
  pciBusId(i: number): string {
    return `00000000:${(0x18 + 0x10 * i).toString(16).toUpperCase().padStart(2, "0")}:00.0`;
  }

  render(load: GpuLoad, faults: readonly GpuFaultState[], now: number): string {
    const exporter = this.modelLabel === "modelName";
    const loadUtil = Math.round(Math.min(1, Math.max(0, load.utilization)) * 100);
    const fault = (i: number): GpuFaultState | undefined => faults[i];
    const utilOf = (i: number) => fault(i)?.utilizationPct ?? loadUtil;
    const busyOf = (i: number) => utilOf(i) / 100;
    const tensorOf = (i: number) => busyOf(i) * (load.computeShare ?? 0.5);
    const dramOf = (i: number) => busyOf(i) * (load.memoryShare ?? 0.5);
    const powerOf = (i: number) => this.spec.idlePowerW + (this.spec.maxPowerW - this.spec.idlePowerW) * Math.min(1, 0.6 * busyOf(i) + 0.4 * tensorOf(i));
    const dt = Math.max(0, now - this.lastAt);
    this.lastAt = now;
    const gpus = Array.from({ length: this.count }, (_, i) => i);
    for (const i of gpus) this.energyMj[i] = this.energyMj[i]! + powerOf(i) * dt; // W × ms = mJ
    const labels = (i: number): Labels => [
      ["gpu", String(i)],
      ["UUID", this.uuid(i)],
      ["pci_bus_id", this.pciBusId(i)],
      ["device", `nvidia${i}`],
      [this.modelLabel, this.spec.model],
      ["hostname", this.hostname],
      ["DCGM_FI_DRIVER_VERSION", DRIVER_VERSION],
    ];
    // The exporter types cumulative fields as counters; promtool wants counters to end in _total.
    const counter = exporter ? "counter" : "gauge";
    const temp = (i: number) => fault(i)?.temperatureC ?? 32 + Math.round(0.4 * utilOf(i));
    const free = this.spec.memoryMiB - this.spec.driverReservedMiB - this.usedMiB;
    const w = new PromWriter();
    const fam = (name: string, type: "gauge" | "counter", help: string, value: (i: number) => number) =>
      w.family(
        name,
        type,
        help,
        gpus.map((i) => ({ labels: labels(i), value: value(i) })),
      );
    fam("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", (i) => (utilOf(i) > 0 ? 1980 : 345));
    fam("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", () => 2619);
    fam("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", (i) => temp(i) + 4);
    fam("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", temp);
    fam("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", (i) => Math.round(powerOf(i) * 1000) / 1000);
    fam("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", counter, "Total energy consumption since boot (in mJ).", (i) => Math.round(this.energyMj[i]!));
    // promtool objects to "counter" in a metric name whatever its type: the clean variant leaves this one out.
    if (exporter) fam("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", counter, "Total number of PCIe retries.", () => 0);
    // A GPU whose driver does not report utilisation has no sample at all.
    w.family(
      "DCGM_FI_DEV_GPU_UTIL",
      "gauge",
      "GPU utilization (in %).",
      gpus.filter((i) => fault(i)?.utilizationReported !== false).map((i) => ({ labels: labels(i), value: utilOf(i) })),
    );
    fam("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", (i) => Math.round(dramOf(i) * 100));
    fam("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", () => 0);
    fam("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", () => 0);
    fam("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", (i) => fault(i)?.xidErrors ?? 0);
    fam("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", () => free);
    fam("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", () => this.usedMiB);
    fam("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).", () => this.spec.driverReservedMiB);
    fam("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", counter, "Total number of NVLink bandwidth counters for all lanes.", () => 0);
    fam("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status", () => 0);
    fam("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", counter, "Number of remapped rows for uncorrectable errors", () => 0);
    fam("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", counter, "Number of remapped rows for correctable errors", () => 0);
    fam("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed", () => 0);
    fam("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", counter, "Total number of single-bit volatile ECC errors.", (i) => fault(i)?.eccSbeVolatile ?? 0);
    fam("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", counter, "Total number of double-bit volatile ECC errors.", (i) => fault(i)?.eccDbeVolatile ?? 0);
    fam("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", counter, "Total number of single-bit persistent ECC errors.", (i) => fault(i)?.eccSbeAggregate ?? 0);
    fam("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", counter, "Total number of double-bit persistent ECC errors.", (i) => fault(i)?.eccDbeAggregate ?? 0);
    fam("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.", (i) => round3(busyOf(i)));
    fam("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active.", (i) => round3(tensorOf(i)));
    fam("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active sending or receiving data.", (i) => round3(dramOf(i)));
    fam(
      "DCGM_FI_PROF_PCIE_TX_BYTES",
      "gauge",
      "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
      (i) => Math.round(2e5 * busyOf(i)),
    );
    fam(
      "DCGM_FI_PROF_PCIE_RX_BYTES",
      "gauge",
      "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
      (i) => Math.round(5e5 * busyOf(i)),
    );
    return w.text();
  }
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
