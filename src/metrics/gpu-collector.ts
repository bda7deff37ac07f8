/**
 * Per-GPU series computed at scrape time: the last report of each DCGM
 * exporter (posted by the health worker) is kept with its time, and a scrape
 * exports the GPUs of exporters that answered within stale_after_ms. Nothing
 * ticks: a target that stopped answering simply has no GPU series at the next
 * scrape, and a field the exporter did not send has no series at all.
 */
import { Gauge, type Registry } from "prom-client";
import type { GpuReport, GpuReportMessage } from "../protocol/gpu-report.ts";
import { FLEET, GPU_LABELS } from "./names.ts";

/** One GPU and the node it sits on, as the collector exports it. */
export interface NodeGpu {
  node: string;
  gpu: GpuReport;
  /** The exporter URL a static endpoint's GPU was read from (undefined for a fleet node's, which its agent reports); not a label. */
  exporter?: string;
}

/** Anything that can list the GPUs to export now: static DCGM targets and the fleet's nodes, combined (src/admin/fleet-collectors.ts). */
type GpuSource = () => readonly NodeGpu[];

/**
 * The node label of a static endpoint's GPUs: the host of its dcgm_url
 * (`http://10.0.0.11:9400/metrics` → `10.0.0.11`), the one name the config
 * gives for the machine. Fleet nodes use their registered names instead.
 */
export function nodeOfDcgmUrl(url: string): string {
  return new URL(url).hostname;
}

/** Latest report per exporter URL, on the main thread. */
export class DcgmGpuStore {
  private readonly byUrl = new Map<string, GpuReportMessage>();

  constructor(private readonly staleAfterMs: number) {}

  update(msg: GpuReportMessage): void {
    this.byUrl.set(msg.url, msg);
  }

  /**
   * GPUs of exporters whose last good scrape is at most staleAfterMs old at
   * `now`; `exclude`: exporter URLs whose GPUs are exported another way (a
   * fleet node's, under the node's name).
   */
  live(now: number, exclude?: ReadonlySet<string>): NodeGpu[] {
    const out: NodeGpu[] = [];
    for (const [url, msg] of this.byUrl) {
      if (now - msg.sampledAt > this.staleAfterMs || exclude?.has(url)) continue;
      const node = nodeOfDcgmUrl(url);
      for (const gpu of msg.gpus) out.push({ node, gpu, exporter: url });
    }
    return out;
  }
}

type GpuLabel = (typeof GPU_LABELS)[number];

/** Labels of one GPU; an unknown index and a whole GPU's MIG instance are left out (an empty label is no label to Prometheus). */
function labelsOf({ node, gpu }: NodeGpu): Partial<Record<GpuLabel, string>> {
  const labels: Partial<Record<GpuLabel, string>> = { node, uuid: gpu.uuid, class: gpu.gpuClass };
  if (gpu.index !== undefined) labels.gpu = String(gpu.index);
  if (gpu.migInstance !== undefined) labels.mig_instance = gpu.migInstance;
  return labels;
}

/** Register the per-GPU gauges on `registry`, each reading `source` when scraped. */
export function registerGpuCollector(registry: Registry, source: GpuSource): void {
  const gauge = (d: { name: string; help: string }, read: (g: GpuReport) => number | undefined) =>
    new Gauge<GpuLabel>({
      name: d.name,
      help: d.help,
      labelNames: GPU_LABELS,
      registers: [registry],
      collect() {
        this.reset();
        for (const ng of source()) {
          const v = read(ng.gpu);
          if (v !== undefined && Number.isFinite(v)) this.set(labelsOf(ng), v);
        }
      },
    });
  gauge(FLEET.gpuMemoryTotal, (g) => g.memoryTotalBytes);
  gauge(FLEET.gpuMemoryUsed, (g) => g.memoryUsedBytes);
  gauge(FLEET.gpuUtilization, (g) => g.utilization);
  gauge(FLEET.gpuTemperature, (g) => g.temperatureC);
  gauge(FLEET.gpuPower, (g) => g.powerW);
  // Reasons, not kinds: a fleet GPU can be kept out of placement for what is not a fault kind (MIG mode on).
  gauge(FLEET.gpuHealthy, (g) => (g.faultReasons.length === 0 ? 1 : 0));
  new Gauge<GpuLabel | "kind">({
    name: FLEET.gpuFault.name,
    help: FLEET.gpuFault.help,
    labelNames: FLEET.gpuFault.labels,
    registers: [registry],
    collect() {
      this.reset();
      for (const ng of source()) for (const kind of ng.gpu.faultKinds) this.set({ ...labelsOf(ng), kind }, 1);
    },
  });
}
