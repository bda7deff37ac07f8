/** DCGM samples with their verdicts → the plain GpuReports the health worker posts to the main thread. */

import type { GpuReport } from "../protocol/gpu-report.ts";
import { gpuClass } from "../shared/gpu-class.ts";
import type { AssessedGpu } from "./dcgm-poller.ts";

const MIB = 1024 * 1024;

/**
 * Framebuffer size in MiB: DCGM_FI_DEV_FB_TOTAL when sent, else used + free
 * (+ reserved, which newer exporters split out of "used"), as nvidia-smi's
 * memory.total counts them. Undefined unless the parts are there.
 */
export function framebufferTotalMiB(g: AssessedGpu["sample"]): number | undefined {
  if (g.fbTotalMiB !== undefined) return g.fbTotalMiB;
  if (g.fbUsedMiB === undefined || g.fbFreeMiB === undefined) return undefined;
  return g.fbUsedMiB + g.fbFreeMiB + (g.fbReservedMiB ?? 0);
}

export function gpuReport({ sample, assessment }: AssessedGpu): GpuReport {
  const totalMiB = framebufferTotalMiB(sample);
  return {
    uuid: sample.uuid,
    index: sample.gpu,
    migInstance: sample.migInstance,
    gpuClass: gpuClass(sample.modelName ?? "", totalMiB),
    memoryTotalBytes: totalMiB === undefined ? undefined : totalMiB * MIB,
    memoryUsedBytes: sample.fbUsedMiB === undefined ? undefined : sample.fbUsedMiB * MIB,
    // Only the device's own utilisation counter: DCP's engine-active ratio
    // measures something else, and a made-up figure is worse than none.
    utilization: sample.utilPct === undefined ? undefined : sample.utilPct / 100,
    temperatureC: sample.tempC,
    powerW: sample.powerW,
    faultKinds: [...assessment.kinds],
    faultReasons: [...assessment.reasons],
  };
}
