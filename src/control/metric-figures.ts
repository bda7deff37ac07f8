/**
 * The fleet as figures, read at the moment someone looks (a Prometheus
 * scrape, a dashboard poll): nodes by state, each answering node's GPUs (the
 * agent's inventory merged with its dcgm-exporter) and fabric ports, replicas
 * by state, models desired vs serving. Nothing here is kept between reads, so
 * nothing can drift; a node that stopped answering contributes its state and
 * nothing else.
 */
import type { NodeGpu } from "../metrics/gpu-collector.ts";
import { GPU_FAULT_KINDS, type GpuFaultKind, type NodeState, type ReplicaState } from "../metrics/names.ts";
import type { AgentGpu, AgentSnapshot, DcgmVerdicts } from "../protocol/agent-messages.ts";
import type { GpuReport } from "../protocol/gpu-report.ts";
import type { FleetManager } from "./fleet-manager.ts";
import { gpuFaults } from "./placement-inputs.ts";
import { isServing, type ReplicaView } from "./reconcile.ts";
import type { NodeState as FleetNodeState } from "./types.ts";

const MIB = 1024 * 1024;

interface NodeFigure {
  name: string;
  state: NodeState;
  /** The agent answered within node_not_ready_after_ms (Ready). */
  answering: boolean;
  lastAnswerAgeMs: number | null;
  lastError: string | null;
  /** Why the node takes no new replicas, as given to cordon (a drain's is "drain"); null when not cordoned or given none. */
  cordonReason: string | null;
}

interface FabricPortFigure {
  node: string;
  adapter: string;
  port: number;
  linkLayer: string | undefined;
  /** Bytes per second; undefined when sysfs gives no rate. */
  rateBytesPerSecond: number | undefined;
  active: boolean;
}

interface ReplicaFigure {
  id: string;
  model: string;
  state: ReplicaState;
  /** Node and GPU indices of each shard. */
  shards: { node: string; gpus: number[] }[];
  inRotation: boolean;
  detail: string | null;
}

interface ModelFigure {
  name: string;
  desired: number;
  serving: number;
}

export interface FleetFigures {
  nodes: NodeFigure[];
  gpus: NodeGpu[];
  fabric: FabricPortFigure[];
  replicas: ReplicaFigure[];
  models: ModelFigure[];
}

/** One label per node: not answering first (nothing else about it is known now), then a running drain, then a cordon. */
export function nodeStateLabel(state: FleetNodeState, draining: boolean, cordoned: boolean): NodeState {
  // Unknown (not answered yet since this gateway started) is not ready either: nothing can be placed there.
  if (state !== "Ready") return "not_ready";
  if (draining) return "draining";
  return cordoned ? "cordoned" : "ready";
}

/** A replica's state label: leaving wins; Lost and Missing are both "lost" (it will be replaced). */
export function replicaStateLabel(
  v: Pick<ReplicaView, "phase"> & { record: Pick<ReplicaView["record"], "draining"> },
  shardStates: readonly string[],
): ReplicaState {
  if (v.record.draining !== null) return "draining";
  switch (v.phase) {
    case "Ready":
      return "ready";
    case "Failed":
      return "failed";
    case "Lost":
    case "Missing":
      return "lost";
    case "Pending":
      return "starting";
    case "Starting":
      return shardStates.includes("Loading") ? "loading" : "starting";
    default: {
      const unreachable: never = v.phase;
      return unreachable;
    }
  }
}

/** The node's DCGM verdicts when they are fresh at `now`; stale ones say nothing. */
function freshDcgm(dcgm: DcgmVerdicts | undefined, now: number, staleAfterMs: number): DcgmVerdicts | undefined {
  if (!dcgm || dcgm.stale || dcgm.sampledAt === undefined || now - dcgm.sampledAt > staleAfterMs) return undefined;
  return dcgm;
}

const mib = (v: number | null) => (v === null ? undefined : v * MIB);

/**
 * One fleet GPU as the collector exports it: identity and class from the
 * agent's inventory; figures from the node's dcgm-exporter where it sends
 * them (sampled more often, and the only source of temperature and power),
 * else from nvidia-smi; faults as placement sees them (the agent's blocking
 * flags and the exporter's verdicts). A figure neither reports stays absent.
 */
export function fleetGpuReport(gpu: AgentGpu, dcgm: DcgmVerdicts | undefined): GpuReport {
  const sample = dcgm ? (dcgm.gpus.find((g) => g.uuid === gpu.uuid) ?? dcgm.gpus.find((g) => g.index === gpu.index))?.report : undefined;
  const kinds = new Set<GpuFaultKind>(sample?.faultKinds ?? []);
  if (gpu.health.reasons.includes("ecc_uncorrected")) kinds.add("ecc");
  return {
    uuid: gpu.uuid,
    index: gpu.index,
    migInstance: undefined,
    gpuClass: gpu.class,
    memoryTotalBytes: sample?.memoryTotalBytes ?? mib(gpu.memoryTotalMiB),
    memoryUsedBytes: sample?.memoryUsedBytes ?? mib(gpu.memoryUsedMiB),
    utilization: sample?.utilization ?? (gpu.utilizationPct === null ? undefined : gpu.utilizationPct / 100),
    temperatureC: sample?.temperatureC,
    powerW: sample?.powerW,
    faultKinds: GPU_FAULT_KINDS.filter((k) => kinds.has(k)),
    faultReasons: gpuFaults(gpu, dcgm),
  };
}

/** Fabric ports of an answering node (InfiniBand/RoCE rates are Gb/s in sysfs). */
export function fabricPorts(node: string, snapshot: AgentSnapshot | undefined): FabricPortFigure[] {
  return (snapshot?.state?.fabric.adapters ?? []).flatMap((a) =>
    a.ports.map((p) => ({
      node,
      adapter: a.name,
      port: p.port,
      linkLayer: p.linkLayer ?? undefined,
      rateBytesPerSecond: p.rateGbps === null ? undefined : (p.rateGbps * 1e9) / 8,
      active: p.active,
    })),
  );
}

/** Read the fleet now. `staleAfterMs`: DCGM samples older than this are not used. */
export function fleetFigures(manager: FleetManager, now: number, staleAfterMs: number): FleetFigures {
  const { state } = manager;
  const view = manager.view(now);
  const nodes: NodeFigure[] = [];
  const gpus: NodeGpu[] = [];
  const fabric: FabricPortFigure[] = [];
  for (const entry of state.registry.list()) {
    const placed = view.nodes.find((n) => n.name === entry.name);
    const fleetState = placed?.state ?? "Unknown";
    const snap = entry.snapshot;
    const answering = fleetState === "Ready";
    nodes.push({
      name: entry.name,
      state: nodeStateLabel(fleetState, state.drains.get(entry.name)?.state === "running", state.cordons.has(entry.name)),
      answering,
      lastAnswerAgeMs: snap?.answeredAt === undefined ? null : Math.max(0, now - snap.answeredAt),
      // As `llmgw ctl nodes` words it (src/ctl/views.ts): the poll's error while polls fail, else the last call's.
      lastError: snap?.ok === false && snap.lastError ? snap.lastError : (state.nodeErrors.get(entry.name)?.message ?? null),
      cordonReason: state.cordons.get(entry.name)?.reason ?? null,
    });
    // A node that stopped answering has no GPU or fabric figures: its last answer is not the present.
    if (!answering || !snap?.state) continue;
    const dcgm = freshDcgm(snap.dcgm, now, staleAfterMs);
    for (const g of snap.state.gpus) gpus.push({ node: entry.name, gpu: fleetGpuReport(g, dcgm) });
    fabric.push(...fabricPorts(entry.name, snap));
  }
  const replicas: ReplicaFigure[] = view.replicas.map((v) => {
    const verdict = state.replicas.get(v.record.id)?.verdict;
    return {
      id: v.record.id,
      model: v.record.model,
      state: replicaStateLabel(v, verdict?.shards.map((s) => s.state) ?? []),
      shards: v.record.shards.map((s) => ({ node: s.node, gpus: [...s.gpus] })),
      inRotation: v.handedOff && !v.drainingSignalled,
      detail: verdict?.detail ?? null,
    };
  });
  const models: ModelFigure[] = [...state.models.values()]
    .map((m) => ({
      name: m.spec.name,
      desired: m.spec.replicas,
      serving: view.replicas.filter((r) => r.record.model === m.spec.name && r.record.draining === null && isServing(r)).length,
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
  return { nodes, gpus, fabric, replicas: replicas.sort((a, b) => a.model.localeCompare(b.model) || a.id.localeCompare(b.id)), models };
}
