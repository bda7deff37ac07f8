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

type Histogram = DashboardSnapshot["traffic"]["ttft"];

/** The series of a prom-client histogram that `keep` accepts, added up into one histogram. */
function sumHistogram(h: MetricValues, keep: (labels: MetricValues["values"][number]["labels"]) => boolean = () => true): Histogram {
  const byLe = new Map<number, number>();
  let count = 0;
  let sum = 0;
  for (const v of h.values) {
    if (!keep(v.labels)) continue;
    if (v.metricName?.endsWith("_count")) count += v.value;
    else if (v.metricName?.endsWith("_sum")) sum += v.value;
    else if (v.metricName?.endsWith("_bucket") && v.labels.le !== "+Inf") {
      const le = Number(v.labels.le);
      byLe.set(le, (byLe.get(le) ?? 0) + v.value);
    }
  }
  const buckets = [...byLe].sort((a, b) => a[0] - b[0]).map(([le, n]) => ({ le, count: n }));
  return { count, sum, buckets };
}

/**
 * Requests and server-fault errors so far, the TTFT histogram of every model
 * together, the duration of non-streamed requests (their time to headers:
 * a buffered answer's headers go out with its body) and the output tokens.
 */
export function trafficTotals(requests: MetricValues, ttft: MetricValues, duration: MetricValues, tokens: MetricValues): DashboardSnapshot["traffic"] {
  let total = 0;
  let errors = 0;
  for (const v of requests.values) {
    total += v.value;
    if (faults.has(String(v.labels.outcome))) errors += v.value;
  }
  let completion = 0;
  for (const v of tokens.values) if (v.labels.kind === "completion") completion += v.value;
  return {
    requests: total,
    errors,
    ttft: sumHistogram(ttft),
    time_to_headers: sumHistogram(duration, (labels) => String(labels.stream) === "false"),
    completion_tokens: completion,
  };
}

export function dashboardSource(deps: DashboardSourceDeps): () => Promise<DashboardSnapshot> {
  const now = deps.now ?? Date.now;
  return async () => {
    const m = deps.ctx.metrics;
    const [requests, ttft, duration, tokens] = await Promise.all([m.requests.get(), m.ttft.get(), m.duration.get(), m.tokens.get()]);
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
      traffic: trafficTotals(requests, ttft, duration, tokens),
    });
  };
}
