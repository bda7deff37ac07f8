/**
 * Per-GPU health flags, pure. "Foreign process" is decided by pid: nvidia-smi
 * lists every process holding memory on a GPU (`--query-compute-apps`), and a
 * process is ours when it belongs to the process group of one of our
 * replicas (engines fork workers into their group). Comparing used memory
 * with an estimate of what our replicas hold would guess; the pid list does
 * not. When the process list is unavailable the flag is unknown (null), not
 * "clean". Caveat: inside a container whose pid namespace differs from the
 * driver's, the pids nvidia-smi prints are host pids and every process looks
 * foreign; run the agent in the host pid namespace.
 */

import { gpuClass, memoryGiB } from "../shared/gpu-class.ts";
import type { ComputeApp, GpuRecord } from "./nvidia-smi-csv.ts";

type GpuHealthReason = "ecc_uncorrected" | "foreign_process" | "mig_enabled";

interface ForeignProcess {
  pid: number;
  usedMemoryMiB: number | null;
}

interface GpuHealth {
  ok: boolean;
  reasons: GpuHealthReason[];
  /** Processes on this GPU that are not ours; null when nvidia-smi could not list processes. */
  foreignProcesses: ForeignProcess[] | null;
}

/** What the agent reports for one GPU (JSON-ready: absent values are null). */
export interface GpuView {
  index: number;
  uuid: string;
  name: string;
  class: string;
  memoryTotalMiB: number | null;
  memoryTotalGiB: number | null;
  memoryUsedMiB: number | null;
  computeCapability: string | null;
  utilizationPct: number | null;
  eccUncorrectedVolatile: number | null;
  eccCorrectedVolatile: number | null;
  migEnabled: boolean | null;
  health: GpuHealth;
}

/** Reasons that make a GPU unusable for a new replica (a foreign process is reported, not refused: see module doc). */
export const BLOCKING_HEALTH_REASONS: readonly GpuHealthReason[] = ["ecc_uncorrected", "mig_enabled"];

export function gpuHealth(gpu: GpuRecord, apps: readonly ComputeApp[] | undefined, isOurs: (pid: number) => boolean): GpuHealth {
  const reasons: GpuHealthReason[] = [];
  if (gpu.eccUncorrectedVolatile !== undefined && gpu.eccUncorrectedVolatile > 0) reasons.push("ecc_uncorrected");
  // A MIG-enabled GPU cannot run an engine on the whole device; its slices are not scheduled by llmgw.
  if (gpu.migEnabled === true) reasons.push("mig_enabled");
  let foreign: ForeignProcess[] | null = null;
  if (apps !== undefined) {
    foreign = apps.filter((a) => a.gpuUuid === gpu.uuid && !isOurs(a.pid)).map((a) => ({ pid: a.pid, usedMemoryMiB: a.usedMemoryMiB ?? null }));
    if (foreign.length > 0) reasons.push("foreign_process");
  }
  return { ok: reasons.length === 0, reasons, foreignProcesses: foreign };
}

export function gpuView(gpu: GpuRecord, health: GpuHealth): GpuView {
  return {
    index: gpu.index,
    uuid: gpu.uuid,
    name: gpu.name,
    class: gpuClass(gpu.name, gpu.memoryTotalMiB),
    memoryTotalMiB: gpu.memoryTotalMiB ?? null,
    memoryTotalGiB: gpu.memoryTotalMiB === undefined ? null : memoryGiB(gpu.memoryTotalMiB),
    memoryUsedMiB: gpu.memoryUsedMiB ?? null,
    computeCapability: gpu.computeCapability ?? null,
    utilizationPct: gpu.utilizationPct ?? null,
    eccUncorrectedVolatile: gpu.eccUncorrectedVolatile ?? null,
    eccCorrectedVolatile: gpu.eccCorrectedVolatile ?? null,
    migEnabled: gpu.migEnabled ?? null,
    health,
  };
}
