/**
 * The scrape-time collectors over what the gateway already holds, registered
 * once: the per-GPU series from ONE combined source (static endpoints' DCGM
 * exporters under their host, fleet nodes' GPUs under the node's name from
 * the agent's inventory merged with the node's exporter), the fleet series,
 * and queue depth per pool and band. The same reads feed the dashboard.
 */

import type { Registry } from "prom-client";
import type { FleetManager } from "../control/fleet-manager.ts";
import { type FleetFigures, fleetFigures } from "../control/metric-figures.ts";
import { registerAutoscalerCollector } from "../metrics/autoscaler-collector.ts";
import { oncePerRun, registerAdapterCollector, registerFleetCollector } from "../metrics/fleet-collector.ts";
import { type DcgmGpuStore, type NodeGpu, registerGpuCollector } from "../metrics/gpu-collector.ts";
import { registerPoolCollector } from "../metrics/pool-collector.ts";
import type { PoolTable } from "../shared/endpoint-table.ts";

interface FleetMetricsDeps {
  registry: Registry;
  /** Latest GPUs of each DCGM exporter the health worker polls for endpoints. */
  gpuStore: DcgmGpuStore;
  /** The control plane, when the gateway runs one. */
  fleet: FleetManager | undefined;
  /** health.stale_after_ms: DCGM samples older than this are not exported. */
  staleAfterMs: number;
  pools: PoolTable;
  bandNames: readonly string[];
  /** The live pools (row and name). */
  poolList: () => Iterable<{ index: number; name: string }>;
  now?: () => number;
}

/** What the collectors read, for others that show the same (the dashboard). */
export interface FleetReads {
  /** The fleet now; undefined without a fleet. */
  figures(): FleetFigures | undefined;
  /** Every GPU exported now, static and fleet (`fleet`: a read of figures()). */
  gpus(fleet: FleetFigures | undefined): NodeGpu[];
}

/** Exporter URLs that belong to fleet nodes: their GPUs are the fleet's, under the node's name. */
function fleetExporterUrls(fleet: FleetManager): Set<string> {
  const out = new Set<string>();
  for (const e of fleet.state.registry.list()) if (e.dcgmUrl !== undefined) out.add(e.dcgmUrl);
  return out;
}

export function registerFleetMetrics(deps: FleetMetricsDeps): FleetReads {
  const now = deps.now ?? Date.now;
  const fleet = deps.fleet;
  const figures = (): FleetFigures | undefined => (fleet ? fleetFigures(fleet, now(), deps.staleAfterMs) : undefined);
  const gpus = (f: FleetFigures | undefined): NodeGpu[] => {
    const t = now();
    if (!fleet || !f) return deps.gpuStore.live(t);
    return [...deps.gpuStore.live(t, fleetExporterUrls(fleet)), ...f.gpus];
  };
  // One read of the fleet per scrape, shared by the GPU and the fleet collectors.
  const scrapeFigures = oncePerRun(figures);
  registerGpuCollector(deps.registry, () => gpus(scrapeFigures()));
  if (fleet) {
    registerFleetCollector(deps.registry, scrapeFigures);
    registerAdapterCollector(deps.registry, () => {
      const models = [...fleet.state.models.values()].map((m) => m.spec).filter((m) => m.adapters.length > 0);
      const loaded = fleet.adapters.loaded(models, fleet.state.replicas.values());
      for (const m of models) if (!loaded.has(m.name)) loaded.set(m.name, 0);
      return { loads: fleet.adapters.counts.loads, unloads: fleet.adapters.counts.unloads, loaded };
    });
    const autoscaler = fleet.autoscaler;
    if (autoscaler)
      registerAutoscalerCollector(deps.registry, () =>
        autoscaler.status().map((m) => ({
          model: m.model,
          pinned: m.pinned,
          current: m.current,
          asked: m.decisions.at(-1)?.asked,
          startupSeconds: m.measuredStartupMs === null ? undefined : m.measuredStartupMs / 1000,
          reasons: m.reasons,
        })),
      );
  }
  registerPoolCollector(deps.registry, deps.pools, deps.bandNames, deps.poolList);
  return { figures, gpus };
}
