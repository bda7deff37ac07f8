/**
 * The fleet's durable state behind small async interfaces: desired models,
 * cordons, drain operations, self-registered nodes, the bindings of their
 * names, and the replicas the control plane launched. The embedded backend is bun:sqlite
 * (src/control/sqlite-store.ts); a shared backend (Redis) implements
 * the same interfaces, one hash per collection, and passes the same contract
 * tests (test/unit/fleet-store.test.ts).
 */
import type { Cordon, DrainOp, NodeBinding, RegisteredNode, ReplicaRecord, StoredModel } from "./types.ts";

/** A keyed collection of JSON records. Writes are atomic per record; `list` returns records ordered by key. */
export interface Collection<T> {
  list(): Promise<T[]>;
  get(key: string): Promise<T | undefined>;
  put(key: string, value: T): Promise<void>;
  /** Write only when nothing is under the key, atomically across every process sharing the store; true when written. */
  putIfAbsent(key: string, value: T): Promise<boolean>;
  /** false when there was nothing under the key. */
  delete(key: string): Promise<boolean>;
}

export interface FleetStore {
  /** Keyed by model name. */
  readonly models: Collection<StoredModel>;
  /** Keyed by node name. */
  readonly cordons: Collection<Cordon>;
  /** Keyed by node name: the latest drain of each node. */
  readonly drains: Collection<DrainOp>;
  /** Keyed by node name. */
  readonly nodes: Collection<RegisteredNode>;
  /** Keyed by replica id. */
  readonly replicas: Collection<ReplicaRecord>;
  /** Keyed by node name: which agent holds a self-registered node's name. */
  readonly bindings: Collection<NodeBinding>;
  close(): Promise<void>;
}

export const COLLECTIONS = ["models", "cordons", "drains", "nodes", "replicas", "bindings"] as const;
export type CollectionName = (typeof COLLECTIONS)[number];
