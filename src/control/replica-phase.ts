/**
 * A replica's phase from what its nodes' agents last said, pure. A shard the
 * agent does not list counts as missing only when the agent's answer was
 * requested after the shard was last launched: an answer already on its way
 * when the PUT went out says nothing about it.
 */

import type { AgentReplicaState, AgentReplicaStatus } from "../protocol/agent-messages.ts";
import type { KvEventsSource } from "../protocol/kv-events-messages.ts";
import type { NodeState, ReplicaPhase, ReplicaRecord } from "./types.ts";

export interface NodeObservation {
  state: NodeState;
  /** Replicas of the last valid answer, by agent id. */
  replicas: ReadonlyMap<string, AgentReplicaStatus>;
  /** When the request behind that answer was sent; undefined before any answer. */
  stateRequestedAt: number | undefined;
}

/** What the shell knows about a replica beyond its record. */
export interface ReplicaRuntime {
  /** Per agent id: when the last PUT for it was answered (absent: not launched by this process). */
  launchedAt: Readonly<Record<string, number>>;
  /** Set when the control plane gave up on it (launch refused too often). */
  failure: string | null;
  /** Since when this process watches it: the Ready timeout counts from here. */
  trackedSince: number;
  /** An agent call for it is in flight. */
  busy: boolean;
}

type ShardState = AgentReplicaState | "Missing" | "Pending" | "Unreachable";

interface ShardView {
  node: string;
  agentId: string;
  rank: number;
  gpus: number[];
  state: ShardState;
  endpoint: string | null;
  restarts: number | null;
  message: string | null;
  logTail: string[] | null;
  /** Where the shard's engine publishes KV-cache events, as its agent reports (null: none, or not reported). */
  kvEvents: (KvEventsSource & { endpoint: string }) | null;
}

export interface PhaseVerdict {
  phase: ReplicaPhase;
  /** Why, for people (the failure, the missing shard, the node that stopped answering). */
  detail: string | null;
  shards: ShardView[];
}

function shardView(record: ReplicaRecord, i: number, nodes: ReadonlyMap<string, NodeObservation>, runtime: ReplicaRuntime): ShardView {
  const s = record.shards[i]!;
  const node = nodes.get(s.node);
  const status = node?.replicas.get(s.agentId);
  const base = { node: s.node, agentId: s.agentId, rank: s.rank, gpus: s.gpus };
  if (node?.state !== "Ready") {
    return {
      ...base,
      state: node?.state === "Unknown" ? "Pending" : "Unreachable",
      endpoint: status?.endpoint ?? null,
      restarts: status?.restarts ?? null,
      message: null,
      logTail: null,
      kvEvents: status?.kvEvents ?? null,
    };
  }
  if (status && status.state !== "Stopped") {
    return {
      ...base,
      state: status.state,
      endpoint: status.endpoint,
      restarts: status.restarts,
      message: status.message,
      logTail: status.logTail,
      kvEvents: status.kvEvents ?? null,
    };
  }
  const launched = runtime.launchedAt[s.agentId];
  const answeredSince = node.stateRequestedAt !== undefined && (launched === undefined || node.stateRequestedAt > launched);
  const state: ShardState = runtime.busy || !answeredSince ? "Pending" : "Missing";
  return { ...base, state, endpoint: null, restarts: null, message: null, logTail: null, kvEvents: null };
}

export function derivePhase(
  record: ReplicaRecord,
  nodes: ReadonlyMap<string, NodeObservation>,
  runtime: ReplicaRuntime,
  now: number,
  readyTimeoutMs: number,
): PhaseVerdict {
  const shards = record.shards.map((_, i) => shardView(record, i, nodes, runtime));
  const verdict = (phase: ReplicaPhase, detail: string | null): PhaseVerdict => ({ phase, detail, shards });
  if (runtime.failure !== null) return verdict("Failed", runtime.failure);
  const gone = record.shards.find((s) => !nodes.has(s.node));
  if (gone) return verdict("Lost", `node ${gone.node} is not registered`);
  const unreachable = shards.find((s) => s.state === "Unreachable");
  if (unreachable) return verdict("Lost", `node ${unreachable.node} is NotReady`);
  const failed = shards.find((s, i) => s.state === "Failed" && nodes.get(s.node)?.replicas.get(record.shards[i]!.agentId)?.nextRestartInMs === null);
  if (failed) return verdict("Failed", `shard ${failed.rank} on ${failed.node}: ${failed.message ?? "failed"}`);
  if (shards.every((s) => s.state === "Ready")) return verdict("Ready", null);
  const missing = shards.find((s) => s.state === "Missing");
  if (missing) return verdict("Missing", `the agent on ${missing.node} does not run shard ${missing.rank} (${missing.agentId})`);
  if (now - runtime.trackedSince > readyTimeoutMs) return verdict("Failed", `not Ready after ${Math.round(readyTimeoutMs / 1000)} s`);
  if (shards.every((s) => s.state === "Pending")) return verdict("Pending", null);
  const waiting = shards.find((s) => s.state !== "Ready");
  return verdict("Starting", waiting ? `shard ${waiting.rank} on ${waiting.node}: ${waiting.state}${waiting.message ? ` (${waiting.message})` : ""}` : null);
}
