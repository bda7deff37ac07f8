/** Plain data of the control plane: node states, the records the store keeps, replica phases. */
import type { FleetModelSpec } from "../config/types.ts";
import type { AgentReplicaSpec } from "../protocol/agent-messages.ts";

/** Unknown: not answered since the gateway started and not yet past the NotReady time. */
export type NodeState = "Ready" | "NotReady" | "Unknown";

/** Replica ids the control plane gives to what it launches; anything else on an agent is not ours. */
export const FLEET_REPLICA_PREFIX = "fl-";

/** A desired model as stored: where it came from decides whether a changed config entry wins over an API change. */
export interface StoredModel {
  spec: FleetModelSpec;
  source: "config" | "api";
  /** Hash of the config entry last applied; null when the model was created through the API. */
  configHash: string | null;
  updatedAt: number;
  /** An autoscaled model whose count an operator set (ctl scale): since when; the autoscaler leaves it until released. */
  pinnedAt?: number;
}

/** An agent that registered itself (configured nodes are not stored). */
export interface RegisteredNode {
  name: string;
  url: string;
  token: string;
  dcgmUrl: string | undefined;
  registeredAt: number;
}

/**
 * A node name bound to the agent that registered it first: only a
 * registration presenting that agent's node key may use the name again,
 * until an operator approves a re-bind (src/control/node-binding.ts).
 */
export interface NodeBinding {
  node: string;
  /** sha-256 (hex) of the agent's node key; the key itself is never stored. */
  keySha256: string;
  /** The agent URL that bound the name (for the operator's eyes). */
  url: string;
  boundAt: number;
}

export interface Cordon {
  node: string;
  reason: string | null;
  at: number;
}

type DrainState = "running" | "done" | "cancelled";

export interface DrainOp {
  node: string;
  startedAt: number;
  graceMs: number;
  state: DrainState;
  finishedAt: number | null;
}

/** Why a replica is leaving. */
export type DrainReason = "drain" | "scale-down" | "model-removed";

/** One engine process group of a replica: a replica spanning nodes has one shard per node. */
export interface ShardRecord {
  node: string;
  /** The id under which the agent knows it. */
  agentId: string;
  gpus: number[];
  rank: number;
  spec: AgentReplicaSpec;
}

/** A replica the control plane created (written before the first agent call, so a restart adopts instead of duplicating). */
export interface ReplicaRecord {
  id: string;
  model: string;
  pool: string;
  engine: FleetModelSpec["engine"];
  shards: ShardRecord[];
  createdAt: number;
  /** Leaving: since when, why, and the grace period that bounds it (a drain's own, else the configured one). */
  draining: { since: number; reason: DrainReason; graceMs: number } | null;
}

/**
 * Pending: no agent has reported it yet. Starting: launched, not Ready.
 * Ready: every shard Ready. Missing: a Ready agent answered without it.
 * Failed: gave up (agent stopped restarting it, launch refused, not Ready in
 * time). Lost: a shard's node is NotReady or gone.
 */
export type ReplicaPhase = "Pending" | "Starting" | "Ready" | "Missing" | "Failed" | "Lost";
