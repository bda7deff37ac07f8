/**
 * The dashboard's JSON snapshot (GET /admin/v1/dashboard): the fleet, its
 * GPUs, endpoints, pools and cumulative traffic counters at one instant,
 * from the same reads as the scrape-time collectors. Figures nobody reported
 * are null, never 0. Rates are left to the page (differences between two
 * snapshots), so the gateway keeps no history for it.
 */
import { z } from "zod";
import type { FleetFigures } from "../../control/metric-figures.ts";
import type { NodeGpu } from "../../metrics/gpu-collector.ts";
import { NODE_STATES, REPLICA_STATES } from "../../metrics/names.ts";

const nullable = <T extends z.ZodType>(t: T, what: string) => t.nullable().describe(`${what}; null when not reported`);

const histogramSchema = z.object({
  count: z.number(),
  sum: z.number(),
  buckets: z.array(z.object({ le: z.number(), count: z.number() })).describe("cumulative; +Inf is `count`"),
});

export const dashboardSnapshotSchema = z.object({
  at: z.number().int().describe("Date.now() of the snapshot (ms)"),
  fleet: z.boolean().describe("whether the gateway runs the fleet manager"),
  nodes: z.array(
    z.object({
      name: z.string(),
      state: z.enum(NODE_STATES),
      answering: z.boolean(),
      last_answer_age_ms: nullable(z.number().int(), "since the agent last answered"),
      last_error: z.string().nullable(),
      cordon_reason: z
        .string()
        .nullable()
        .describe('why the node takes no new replicas, as given to cordon (a drain\'s is "drain"); null when not cordoned or given none'),
    }),
  ),
  gpus: z.array(
    z.object({
      node: z.string().describe("the fleet node, or the host of a static endpoint's dcgm_url"),
      index: z.number().int().nullable(),
      uuid: z.string(),
      class: z.string(),
      mig_instance: z.string().nullable(),
      memory_total_bytes: nullable(z.number(), "framebuffer size"),
      memory_used_bytes: nullable(z.number(), "framebuffer in use"),
      utilization: nullable(z.number(), "0..1"),
      temperature_c: nullable(z.number(), "core temperature"),
      power_w: nullable(z.number(), "power draw"),
      healthy: z.boolean(),
      faults: z.array(z.string()).describe("why the GPU is kept out of rotation and placement"),
      exporter: z.string().nullable().describe("the dcgm_url a static endpoint's GPU is read from; null for a fleet node's GPU (its agent reports it)"),
      serves: z
        .array(z.string())
        .describe("what runs on the GPU: the static endpoints whose dcgm_url and gpu_ids name it, or the fleet replicas with a shard on it"),
    }),
  ),
  replicas: z.array(
    z.object({
      id: z.string(),
      model: z.string(),
      state: z.enum(REPLICA_STATES),
      shards: z.array(z.object({ node: z.string(), gpus: z.array(z.number().int()) })),
      in_rotation: z.boolean(),
      detail: z.string().nullable(),
    }),
  ),
  models: z.array(z.object({ name: z.string(), desired: z.number().int(), serving: z.number().int() })),
  endpoints: z.array(
    z.object({
      id: z.string(),
      node: z.string().nullable(),
      pool: z.string(),
      ready: z.boolean(),
      draining: z.boolean(),
      gpu_faulted: z.boolean(),
      inflight: z.number().int(),
    }),
  ),
  pools: z.array(
    z.object({
      name: z.string(),
      saturation: nullable(z.number(), "the worse of queue pressure and KV occupancy"),
      queue_depth: z.array(z.object({ band: z.string(), depth: z.number().int() })).describe("requests waiting for admission, per band"),
    }),
  ),
  traffic: z
    .object({
      requests: z.number().describe("requests finished since start, every outcome"),
      errors: z.number().describe("of which failed through the gateway's or the fleet's fault (no_endpoint, upstream_error, stream_error, timeout)"),
      ttft: histogramSchema.describe("arrival to the first token relayed, streamed requests of every model together"),
      time_to_headers: histogramSchema.describe(
        "duration of non-streamed requests, every model and route together: their answer is held until complete and its headers go out with it, so this is their time to headers (an answer over 1 MiB streams through after its headers: it reads high there)",
      ),
      completion_tokens: z.number().describe("output tokens the engines reported since start, every model"),
    })
    .describe("cumulative counters: the page derives rates, TTFT (or time to headers) quantiles and tokens per second from two snapshots"),
});
export type DashboardSnapshot = z.infer<typeof dashboardSnapshotSchema>;

/** A static endpoint as far as its GPUs go (the registry's spec). */
interface StaticEndpointGpus {
  id: string;
  dcgmUrl: string | undefined;
  /** UUIDs or indices as the exporter labels them; empty: every GPU of its exporter. */
  gpuIds: readonly string[];
}

/** What the snapshot is made of, each read once per snapshot. */
interface DashboardInputs {
  at: number;
  fleet: FleetFigures | undefined;
  gpus: readonly NodeGpu[];
  /** The static endpoints (fleet replicas are found through fleet.replicas). */
  statics: readonly StaticEndpointGpus[];
  endpoints: DashboardSnapshot["endpoints"];
  pools: DashboardSnapshot["pools"];
  traffic: DashboardSnapshot["traffic"];
}

const orNull = (v: number | undefined) => (v === undefined || !Number.isFinite(v) ? null : v);

/**
 * What runs on one GPU: for a static endpoint's (read from an exporter), the
 * endpoints with that dcgm_url whose gpu_ids name it by UUID or index (or
 * that name none: every GPU of the exporter); for a fleet node's, the
 * replicas with a shard on that node and index.
 */
export function gpuServes(g: NodeGpu, statics: readonly StaticEndpointGpus[], replicas: FleetFigures["replicas"]): string[] {
  if (g.exporter !== undefined) {
    const index = g.gpu.index === undefined ? undefined : String(g.gpu.index);
    return statics
      .filter((e) => e.dcgmUrl === g.exporter && (e.gpuIds.length === 0 || e.gpuIds.includes(g.gpu.uuid) || (index !== undefined && e.gpuIds.includes(index))))
      .map((e) => e.id);
  }
  const index = g.gpu.index;
  if (index === undefined) return [];
  return replicas.filter((r) => r.shards.some((s) => s.node === g.node && s.gpus.includes(index))).map((r) => r.id);
}

function gpuView({ node, gpu: g, exporter }: NodeGpu): Omit<DashboardSnapshot["gpus"][number], "serves"> {
  return {
    node,
    index: g.index ?? null,
    uuid: g.uuid,
    class: g.gpuClass,
    mig_instance: g.migInstance ?? null,
    memory_total_bytes: orNull(g.memoryTotalBytes),
    memory_used_bytes: orNull(g.memoryUsedBytes),
    utilization: orNull(g.utilization),
    temperature_c: orNull(g.temperatureC),
    power_w: orNull(g.powerW),
    healthy: g.faultReasons.length === 0,
    faults: [...g.faultReasons],
    exporter: exporter ?? null,
  };
}

export function dashboardSnapshot(i: DashboardInputs): DashboardSnapshot {
  const f = i.fleet;
  return {
    at: i.at,
    fleet: f !== undefined,
    nodes: (f?.nodes ?? []).map((n) => ({
      name: n.name,
      state: n.state,
      answering: n.answering,
      last_answer_age_ms: n.lastAnswerAgeMs,
      last_error: n.lastError,
      cordon_reason: n.cordonReason,
    })),
    gpus: i.gpus.map((ng) => ({ ...gpuView(ng), serves: gpuServes(ng, i.statics, f?.replicas ?? []) })),
    replicas: (f?.replicas ?? []).map((r) => ({ id: r.id, model: r.model, state: r.state, shards: r.shards, in_rotation: r.inRotation, detail: r.detail })),
    models: (f?.models ?? []).map((m) => ({ ...m })),
    endpoints: i.endpoints,
    pools: i.pools,
    traffic: i.traffic,
  };
}
