/**
 * One GPU as its dcgm-exporter last reported it, in the plain form the health
 * worker posts to the main thread (and the metrics collector exports). A
 * field the exporter did not send is undefined: absent, never 0.
 */

/** Why a GPU is faulted: a closed set that doubles as the `kind` metric label. */
export const GPU_FAULT_KINDS = ["xid", "ecc", "row_remap", "page_retirement", "temperature", "memory_temperature"] as const;
export type GpuFaultKind = (typeof GPU_FAULT_KINDS)[number];

export interface GpuReport {
  uuid: string;
  /** Index on its host (the exporter's `gpu` label). */
  index: number | undefined;
  /** MIG GPU instance id when the exporter reports per instance (several reports then share a uuid). */
  migInstance: string | undefined;
  /** `<family>-<GiB>g`, the same rule as the agent's inventory (src/shared/gpu-class.ts). */
  gpuClass: string;
  memoryTotalBytes: number | undefined;
  memoryUsedBytes: number | undefined;
  /** 0..1 (DCGM_FI_DEV_GPU_UTIL / 100). */
  utilization: number | undefined;
  temperatureC: number | undefined;
  powerW: number | undefined;
  /** Distinct fault kinds present, in GPU_FAULT_KINDS order; [] = healthy. */
  faultKinds: GpuFaultKind[];
  /** One line per fault, as the GPU monitor words it ("xid 79: GPU has fallen off the bus"). */
  faultReasons: string[];
}

/** health → main: the GPUs of one exporter after a successful scrape. */
export interface GpuReportMessage {
  type: "gpus";
  /** The exporter's scrape URL, as configured (endpoints[].dcgm_url). */
  url: string;
  /** Date.now() of the scrape, in the health worker. */
  sampledAt: number;
  gpus: GpuReport[];
}
