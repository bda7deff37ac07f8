/**
 * Pure views of the fleet built from node polls and replica records: what
 * each agent runs (for replica phases), and the nodes as placement sees them
 * (GPUs with their faults and holders, fabric, replicas per model). A GPU's
 * faults come from the agent (blocking health flags) and from the node's
 * dcgm-exporter (XID, ECC, temperature; matched by UUID, else by index on
 * that host), unless that scrape is stale.
 */
import { type AgentGpu, type AgentReplicaStatus, type AgentSnapshot, BLOCKING_GPU_HEALTH_REASONS, type DcgmVerdicts } from "../protocol/agent-messages.ts";
import type { PlacementGpu, PlacementNode } from "./placement-types.ts";
import { replicaIdOf } from "./replica-builder.ts";
import type { NodeObservation } from "./replica-phase.ts";
import type { NodeState, ReplicaRecord } from "./types.ts";

export interface NodeInput {
  name: string;
  state: NodeState;
  cordoned: boolean;
  snapshot: AgentSnapshot | undefined;
}

export function observeNodes(nodes: readonly NodeInput[]): Map<string, NodeObservation> {
  return new Map(
    nodes.map((n) => [
      n.name,
      {
        state: n.state,
        replicas: new Map((n.snapshot?.state?.replicas ?? []).map((r): [string, AgentReplicaStatus] => [r.id, r])),
        stateRequestedAt: n.snapshot?.stateRequestedAt,
      },
    ]),
  );
}

function describeAgentReason(gpu: AgentGpu, reason: string): string {
  if (reason === "ecc_uncorrected") return `ECC: ${gpu.eccUncorrectedVolatile ?? "some"} uncorrected error(s) since the driver loaded`;
  if (reason === "mig_enabled") return "MIG mode is enabled (slices are not scheduled)";
  return reason;
}

/** Why a GPU may not take a replica; empty when healthy. */
export function gpuFaults(gpu: AgentGpu, dcgm: DcgmVerdicts | undefined): string[] {
  const out = gpu.health.reasons.filter((r) => BLOCKING_GPU_HEALTH_REASONS.includes(r)).map((r) => describeAgentReason(gpu, r));
  if (dcgm && !dcgm.stale) {
    const sample = dcgm.gpus.find((g) => g.uuid === gpu.uuid) ?? dcgm.gpus.find((g) => g.index === gpu.index);
    if (sample) out.push(...sample.reasons.map((r) => `DCGM: ${r}`));
  }
  return out;
}

function transportsOf(snapshot: AgentSnapshot | undefined): ("ib" | "roce")[] | null {
  const fabric = snapshot?.state?.fabric;
  if (!fabric) return null;
  const set = new Set<"ib" | "roce">();
  for (const a of fabric.adapters) for (const p of a.ports) if (p.active && p.transport !== "other") set.add(p.transport);
  return [...set].sort();
}

/** Holder of each GPU index on a node: what the agent runs, plus records not reported yet. */
function holders(node: NodeInput, records: readonly ReplicaRecord[]): Map<number, string> {
  const out = new Map<number, string>();
  for (const r of node.snapshot?.state?.replicas ?? []) {
    if (r.state === "Stopped") continue;
    for (const g of r.gpus) out.set(g, replicaIdOf(r.id));
  }
  for (const rec of records) for (const s of rec.shards) if (s.node === node.name) for (const g of s.gpus) if (!out.has(g)) out.set(g, rec.id);
  return out;
}

/** The nodes as placement sees them (replicas per model are counted by the planner, src/control/reconcile.ts). */
export function placementNodes(nodes: readonly NodeInput[], records: readonly ReplicaRecord[]): PlacementNode[] {
  return nodes.map((n) => {
    const held = holders(n, records);
    const gpus: PlacementGpu[] = (n.snapshot?.state?.gpus ?? []).map((g) => ({
      index: g.index,
      uuid: g.uuid,
      class: g.class,
      memoryGiB: g.memoryTotalGiB,
      computeCapability: g.computeCapability,
      faults: gpuFaults(g, n.snapshot?.dcgm),
      usedBy: held.get(g.index) ?? null,
    }));
    return { name: n.name, state: n.state, cordoned: n.cordoned, transports: transportsOf(n.snapshot), gpus, modelReplicas: {} };
  });
}
