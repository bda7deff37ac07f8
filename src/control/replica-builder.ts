/**
 * From a placement to a replica record, pure: ids (file-name safe, with the
 * fleet prefix so agents' other replicas are never taken for ours), the
 * agent spec of each shard, and for a replica spanning nodes the
 * torch.distributed rendezvous on its rank-0 node.
 */
import type { FleetModelSpec } from "../config/types.ts";
import type { AgentReplicaSpec } from "../protocol/agent-messages.ts";
import type { ChosenShard } from "./placement-types.ts";
import { FLEET_REPLICA_PREFIX, type ReplicaRecord, type ShardRecord } from "./types.ts";

/** vLLM's and torch.distributed's customary rendezvous port. */
const MULTI_NODE_MASTER_PORT = 29500;

const SLUG_MAX = 40;

/** "meta-llama/Llama-3.1-8B-Instruct" → "meta-llama-llama-3.1-8b-instruct" (cut to 40 characters). */
export function modelSlug(model: string): string {
  const slug = model
    .toLowerCase()
    .replace(/[^a-z0-9.]+/g, "-")
    .replace(/^[-.]+|[-.]+$/g, "")
    .slice(0, SLUG_MAX)
    .replace(/[-.]+$/, "");
  return slug === "" ? "model" : slug;
}

/** A new replica id: prefix, model slug, 6 random base-36 characters. */
export function newReplicaId(model: string, random: () => number = Math.random): string {
  let suffix = "";
  for (let i = 0; i < 6; i++) suffix += Math.floor(random() * 36).toString(36);
  return `${FLEET_REPLICA_PREFIX}${modelSlug(model)}-${suffix}`;
}

/** The agent id of one shard: the replica id, with `.r<rank>` when the replica spans nodes. */
function shardAgentId(replicaId: string, rank: number, shards: number): string {
  return shards === 1 ? replicaId : `${replicaId}.r${rank}`;
}

/** The fleet replica an agent id belongs to (the id itself for anything else). */
export function replicaIdOf(agentId: string): string {
  return agentId.startsWith(FLEET_REPLICA_PREFIX) ? agentId.replace(/\.r\d+$/, "") : agentId;
}

export function isFleetAgentId(agentId: string): boolean {
  return agentId.startsWith(FLEET_REPLICA_PREFIX);
}

function agentSpec(spec: FleetModelSpec, shard: ChosenShard, rank: number, masterAddr: string | undefined): AgentReplicaSpec {
  const nodes = spec.nodesPerReplica;
  return {
    engine: spec.engine,
    model: spec.name,
    gpus: [...shard.gpus],
    tensorParallel: spec.tensorParallel,
    pipelineParallel: nodes,
    extraArgs: [...spec.engineArgs],
    ...(spec.quantization !== undefined ? { quantization: spec.quantization } : {}),
    ...(spec.maxNumSeqs !== undefined ? { maxNumSeqs: spec.maxNumSeqs } : {}),
    ...(spec.gpuMemoryUtilization !== undefined ? { gpuMemoryUtilization: spec.gpuMemoryUtilization } : {}),
    ...(spec.startupMs !== undefined ? { startupMs: spec.startupMs } : {}),
    ...(spec.lora !== undefined ? { lora: { ...spec.lora } } : {}),
    ...(spec.apiKeyEnv !== undefined ? { apiKeyEnv: spec.apiKeyEnv } : {}),
    ...(nodes > 1 && masterAddr !== undefined ? { multiNode: { nnodes: nodes, nodeRank: rank, masterAddr, masterPort: MULTI_NODE_MASTER_PORT } } : {}),
  };
}

/** The record of a new replica on `shards` (rank order); `hostOf` gives a node's address for the rendezvous. */
export function buildReplicaRecord(
  spec: FleetModelSpec,
  shards: readonly ChosenShard[],
  id: string,
  now: number,
  hostOf: (node: string) => string,
): ReplicaRecord {
  const masterAddr = shards.length > 1 ? hostOf(shards[0]!.node) : undefined;
  const records: ShardRecord[] = shards.map((s, rank) => ({
    node: s.node,
    agentId: shardAgentId(id, rank, shards.length),
    gpus: [...s.gpus],
    rank,
    spec: agentSpec(spec, s, rank, masterAddr),
  }));
  return { id, model: spec.name, pool: spec.pool, engine: spec.engine, shards: records, createdAt: now, draining: null };
}
