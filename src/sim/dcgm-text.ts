/**
 * Simulated GPUs as dcgm-exporter shows them: its /metrics text with its
 * labels (`gpu`, `UUID`, `device`, `modelName`, `Hostname`, driver version)
 * and HELP strings from etc/default-counters.csv, values following the
 * engine's load (utilisation from running / max-num-seqs, framebuffer from
 * KV occupancy) plus the faults set through POST /sim/config (and a GPU
 * whose utilisation is not reported, as some drivers and MIG modes do, or is
 * pinned to a figure, to simulate sustained saturation).
 *
 * The exporter's counter list is user configuration (a CSV of name, type,
 * help); this one declares the cumulative fields whose names do not end in
 * `_total` (energy, ECC) as gauges, so the text passes `promtool check
 * metrics` without complaint. Parsers must not rely on TYPE. For the same
 * reason the GPU model goes in the `DCGM_FI_DEV_NAME` label (a label field
 * the exporter adds when its CSV lists it) unless `modelLabel` asks for the
 * exporter's camelCase `modelName`, which promtool flags.
 */
import type { GpuFaultState } from "./config.ts";
import { PromWriter, type Labels } from "./prom-writer.ts";

export interface GpuLoad {
  /** running / max-num-seqs, 0..1. */
  utilization: number;
  /** KV blocks held / total, 0..1. */
  kvUsage: number;
}

/** Which label carries the GPU model name. */
export type DcgmModelLabel = "DCGM_FI_DEV_NAME" | "modelName";

export interface GpuSpec {
  model: string;
  memoryMiB: number;
  maxPowerW: number;
  idlePowerW: number;
}

const KNOWN_GPUS: Record<string, Omit<GpuSpec, "model">> = {
  "NVIDIA H100 80GB HBM3": { memoryMiB: 81559, maxPowerW: 700, idlePowerW: 70 },
  "NVIDIA H200": { memoryMiB: 143771, maxPowerW: 700, idlePowerW: 75 },
  "NVIDIA A100-SXM4-80GB": { memoryMiB: 81920, maxPowerW: 400, idlePowerW: 60 },
  "NVIDIA L4": { memoryMiB: 23034, maxPowerW: 72, idlePowerW: 16 },
  "Tesla T4": { memoryMiB: 15360, maxPowerW: 70, idlePowerW: 9 },
};

export function gpuSpec(model: string): GpuSpec {
  return { model, ...(KNOWN_GPUS[model] ?? { memoryMiB: 81559, maxPowerW: 700, idlePowerW: 70 }) };
}

/** Share of the framebuffer the weights and activations take; the KV cache may fill the next share. */
const WEIGHTS_FRACTION = 0.3;
const KV_FRACTION = 0.6;
const DRIVER_VERSION = "550.90.07";

export class SimGpus {
  private energyMj: number[];
  private lastAt: number;

  constructor(
    readonly spec: GpuSpec,
    readonly count: number,
    readonly hostname: string,
    private readonly seed: string,
    now: number,
    private readonly modelLabel: DcgmModelLabel = "DCGM_FI_DEV_NAME",
  ) {
    this.energyMj = new Array<number>(count).fill(0);
    this.lastAt = now;
  }

  uuid(i: number): string {
    const h = Bun.hash(`${this.seed}/${i}`).toString(16).padStart(16, "0").slice(-16);
    const t = Bun.hash(`${this.seed}#${i}`).toString(16).padStart(16, "0").slice(-12);
    return `GPU-${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${t.slice(0, 4)}-${t}`.slice(0, 40);
  }

  render(load: GpuLoad, faults: readonly GpuFaultState[], now: number): string {
    // Any running request keeps the GPU busy: round up so light load never reads as idle.
    const loadUtil = Math.ceil(Math.min(1, Math.max(0, load.utilization)) * 100);
    const fault = (i: number): GpuFaultState | undefined => faults[i];
    const utilOf = (i: number) => fault(i)?.utilizationPct ?? loadUtil;
    const powerOf = (i: number) => this.spec.idlePowerW + (this.spec.maxPowerW - this.spec.idlePowerW) * (utilOf(i) / 100);
    const dt = Math.max(0, now - this.lastAt);
    this.lastAt = now;
    const usedMiB = Math.round(this.spec.memoryMiB * (WEIGHTS_FRACTION + KV_FRACTION * Math.min(1, Math.max(0, load.kvUsage))));
    const gpus = Array.from({ length: this.count }, (_, i) => i);
    for (const i of gpus) this.energyMj[i] = this.energyMj[i]! + powerOf(i) * dt; // W × ms = mJ
    const labels = (i: number): Labels => [
      ["gpu", String(i)],
      ["UUID", this.uuid(i)],
      ["device", `nvidia${i}`],
      [this.modelLabel, this.spec.model],
      ["Hostname", this.hostname],
      ["DCGM_FI_DRIVER_VERSION", DRIVER_VERSION],
    ];
    const temp = (i: number) => fault(i)?.temperatureC ?? 32 + Math.round(0.4 * utilOf(i));
    const w = new PromWriter();
    const fam = (name: string, type: "gauge" | "counter", help: string, value: (i: number) => number) =>
      w.family(name, type, help, gpus.map((i) => ({ labels: labels(i), value: value(i) })));
    fam("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", (i) => (utilOf(i) > 0 ? 1980 : 345));
    fam("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", () => 2619);
    fam("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", (i) => temp(i) + 4);
    fam("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", temp);
    fam("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", (i) => Math.round(powerOf(i) * 1000) / 1000);
    fam("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "gauge", "Total energy consumption since boot (in mJ).", (i) => Math.round(this.energyMj[i]!));
    // A GPU whose driver does not report utilisation has no sample at all.
    w.family(
      "DCGM_FI_DEV_GPU_UTIL",
      "gauge",
      "GPU utilization (in %).",
      gpus.filter((i) => fault(i)?.utilizationReported !== false).map((i) => ({ labels: labels(i), value: utilOf(i) })),
    );
    fam("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", (i) => Math.round(utilOf(i) * 0.6));
    fam("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", () => 0);
    fam("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", () => 0);
    fam("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", (i) => fault(i)?.xidErrors ?? 0);
    fam("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", () => this.spec.memoryMiB - usedMiB);
    fam("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", () => usedMiB);
    fam("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "gauge", "Total number of single-bit volatile ECC errors.", (i) => fault(i)?.eccSbeVolatile ?? 0);
    fam("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "gauge", "Total number of double-bit volatile ECC errors.", (i) => fault(i)?.eccDbeVolatile ?? 0);
    fam("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "gauge", "Total number of single-bit persistent ECC errors.", (i) => fault(i)?.eccSbeAggregate ?? 0);
    fam("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "gauge", "Total number of double-bit persistent ECC errors.", (i) => fault(i)?.eccDbeAggregate ?? 0);
    return w.text();
  }
}
