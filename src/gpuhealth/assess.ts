/** Pure verdict on one GPU sample: faulted (keep it out of rotation) and saturated (busy), with reasons. */
import { GPU_FAULT_KINDS, type GpuFaultKind } from "../protocol/gpu-report.ts";
import type { GpuSample } from "./dcgm.ts";
import { FATAL_XIDS } from "./xid.ts";

/** GPU core temperature at or above which the GPU counts as faulted (hardware slowdown is ~87–93 °C on datacenter parts). */
const DEFAULT_GPU_MAX_TEMP_C = 90;
/** HBM temperature limit; HBM2e/HBM3 parts are rated to about 95 °C. */
const DEFAULT_GPU_MAX_MEMORY_TEMP_C = 95;
/** Utilisation (DCGM_FI_DEV_GPU_UTIL, percent) at or above which the GPU counts as saturated. */
const DEFAULT_GPU_SATURATED_UTIL_PCT = 95;

export interface GpuThresholds {
  maxTempC: number;
  maxMemoryTempC: number;
  saturatedUtilPct: number;
  /** XID code → why it is fatal. Defaults to FATAL_XIDS. */
  fatalXids: ReadonlyMap<number, string>;
}

export const DEFAULT_GPU_THRESHOLDS: Readonly<GpuThresholds> = Object.freeze({
  maxTempC: DEFAULT_GPU_MAX_TEMP_C,
  maxMemoryTempC: DEFAULT_GPU_MAX_MEMORY_TEMP_C,
  saturatedUtilPct: DEFAULT_GPU_SATURATED_UTIL_PCT,
  fatalXids: FATAL_XIDS,
});

export interface GpuAssessment {
  faulted: boolean;
  /** Why it is faulted, one line each, stable wording (e.g. "xid 79: GPU has fallen off the bus"). */
  reasons: string[];
  /** The distinct kinds behind `reasons`, in GPU_FAULT_KINDS order (a closed set, for metric labels). */
  kinds: GpuFaultKind[];
  saturated: boolean;
}

function positive(v: number | undefined): v is number {
  return v !== undefined && v > 0;
}

/**
 * Faulted on: a fatal last XID or one counted in the exporter's recent-XID
 * window; volatile double-bit ECC errors (since the last driver load, so a
 * reset clears them — the aggregate counter is lifetime and would keep a
 * repaired GPU out forever); a failed or pending row remap / pending page
 * retirement (NVIDIA: reset the GPU to apply); temperature at a limit.
 * Saturated on utilisation, falling back to DCGM_FI_PROF_GR_ENGINE_ACTIVE
 * (a 0–1 ratio) when DCGM_FI_DEV_GPU_UTIL is absent. Absent fields raise
 * nothing: an exporter that does not send a counter is not evidence of a fault.
 */
export function assessGpu(sample: GpuSample, thresholds: Partial<GpuThresholds> = {}): GpuAssessment {
  const t: GpuThresholds = { ...DEFAULT_GPU_THRESHOLDS, ...thresholds };
  const reasons: string[] = [];
  const kinds = new Set<GpuFaultKind>();
  const fault = (kind: GpuFaultKind, reason: string): void => {
    kinds.add(kind);
    reasons.push(reason);
  };

  if (sample.lastXid !== undefined && sample.lastXid !== 0) {
    const why = t.fatalXids.get(sample.lastXid);
    if (why !== undefined) fault("xid", `xid ${sample.lastXid}: ${why}`);
  }
  for (const [code, count] of Object.entries(sample.recentXids)) {
    const xid = Number(code);
    const why = t.fatalXids.get(xid);
    if (why !== undefined && count > 0 && xid !== sample.lastXid) fault("xid", `xid ${xid}: ${why}`);
  }
  if (positive(sample.eccDbeVolatile)) fault("ecc", `uncorrectable ECC errors: ${sample.eccDbeVolatile} since driver load`);
  if (positive(sample.rowRemapFailure)) fault("row_remap", "row remap failure");
  if (positive(sample.rowRemapPending)) fault("row_remap", "row remap pending: reset the GPU to apply it");
  if (positive(sample.retiredPagesPending)) fault("page_retirement", "page retirement pending: reset the GPU to apply it");
  if (sample.tempC !== undefined && sample.tempC >= t.maxTempC) fault("temperature", `temperature ${sample.tempC} C >= ${t.maxTempC} C`);
  if (sample.memoryTempC !== undefined && sample.memoryTempC >= t.maxMemoryTempC) {
    fault("memory_temperature", `memory temperature ${sample.memoryTempC} C >= ${t.maxMemoryTempC} C`);
  }

  const util = sample.utilPct ?? (sample.grEngineActive === undefined ? undefined : sample.grEngineActive * 100);
  const saturated = util !== undefined && util >= t.saturatedUtilPct;
  return { faulted: reasons.length > 0, reasons, kinds: GPU_FAULT_KINDS.filter((k) => kinds.has(k)), saturated };
}
