/**
 * What the dashboard snapshot is read from in a running gateway: the fleet
 * and GPU reads the collectors use (../fleet-collectors.ts), the endpoint table,
 * the pool and admission tables, and the request counters.
 */

import type { GatewayContext } from "../../gateway/context.ts";
import { SERVER_FAULT_OUTCOMES } from "../../metrics/names.ts";
import { bandDepths } from "../../metrics/pool-collector.ts";
import type { AdmissionStatsTable, PoolTable } from "../../shared/endpoint-table.ts";
import { endpointStates } from "../admin-listener.ts";
import type { FleetReads } from "../fleet-collectors.ts";
import { type DashboardSnapshot, dashboardSnapshot } from "./snapshot.ts";

interface DashboardSourceDeps {
  ctx: GatewayContext;
  reads: FleetReads;
  pools: PoolTable;
  stats: AdmissionStatsTable;
  bandNames: readonly string[];
  poolList: () => Iterable<{ index: number; name: string }>;
  now?: () => number;
}

/** prom-client's values of a metric (what `.get()` resolves to). */
interface MetricValues {
  values: { value: number; metricName?: string; labels: Partial<Record<string, string | number>> }[];
}

const faults = new Set<string>(SERVER_FAULT_OUTCOMES);

/** Requests and server-fault errors so far, and the TTFT histogram of every model together. */
export function trafficTotals(requests: MetricValues, ttft: MetricValues): DashboardSnapshot["traffic"] {
  let total = 0;
  let errors = 0;
  for (const v of requests.values) {
    total += v.value;
    if (faults.has(String(v.labels.outcome))) errors += v.value;
  }
  const byLe = new Map<number, number>();
  let count = 0;
  let sum = 0;
  for (const v of ttft.values) {
    if (v.metricName?.endsWith("_count")) count += v.value;
    else if (v.metricName?.endsWith("_sum")) sum += v.value;
    else if (v.metricName?.endsWith("_bucket") && v.labels.le !== "+Inf") {
      const le = Number(v.labels.le);
      byLe.set(le, (byLe.get(le) ?? 0) + v.value);
    }
  }
  const buckets = [...byLe].sort((a, b) => a[0] - b[0]).map(([le, n]) => ({ le, count: n }));
  return { requests: total, errors, ttft: { count, sum, buckets } };
}

export function dashboardSource(deps: DashboardSourceDeps): () => Promise<DashboardSnapshot> {
  const now = deps.now ?? Date.now;
  return async () => {
    const [requests, ttft] = await Promise.all([deps.ctx.metrics.requests.get(), deps.ctx.metrics.ttft.get()]);
    const fleet = deps.reads.figures();
    return dashboardSnapshot({
      at: now(),
      fleet,
      gpus: deps.reads.gpus(fleet),
      statics: deps.ctx.endpoints
        .active()
        .filter(({ spec }) => spec.node === undefined)
        .map(({ spec }) => ({ id: spec.id, dcgmUrl: spec.dcgmUrl, gpuIds: spec.gpuIds })),
      endpoints: endpointStates(deps.ctx).map((e) => ({
        id: e.id,
        node: e.node,
        pool: e.pool,
        ready: e.ready,
        draining: e.draining,
        gpu_faulted: e.gpu_faulted,
        inflight: e.inflight,
      })),
      pools: [...deps.poolList()].map(({ index, name }) => {
        const saturation = deps.stats.saturation(index);
        return {
          name,
          saturation: Number.isFinite(saturation) ? saturation : null,
          queue_depth: bandDepths(deps.pools, index).map((depth, b) => ({ band: deps.bandNames[b] ?? String(b), depth })),
        };
      }),
      traffic: trafficTotals(requests, ttft),
    });
  };
}
