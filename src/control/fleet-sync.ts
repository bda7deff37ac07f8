/**
 * Several gateways on one shared store: only the lease holder
 * reconciles, but every gateway serves the management API and routes to
 * the fleet's replicas. So each re-reads the store: a follower takes all of
 * it (what the leader placed, what operators changed anywhere), the leader
 * takes what followers may write (desired models, cordons, drains,
 * registrations) and keeps its own replica records, which it alone writes —
 * except for one operator change that rewrites them: an uncordon that
 * cancelled a drain, whose replicas stay.
 */
import type { FleetState, ReplicaEntry } from "./fleet-state.ts";
import type { FleetStore } from "./store.ts";
import type { Cordon, DrainOp, RegisteredNode, ReplicaRecord, StoredModel } from "./types.ts";

interface StoreSnapshot {
  models: StoredModel[];
  cordons: Cordon[];
  drains: DrainOp[];
  nodes: RegisteredNode[];
  replicas: ReplicaRecord[];
}

export async function readSnapshot(store: FleetStore): Promise<StoreSnapshot> {
  const [models, cordons, drains, nodes, replicas] = await Promise.all([
    store.models.list(),
    store.cordons.list(),
    store.drains.list(),
    store.nodes.list(),
    store.replicas.list(),
  ]);
  return { models, cordons, drains, nodes, replicas };
}

interface AppliedSnapshot {
  /** A registered agent appeared or moved: the health worker's poll list must change. */
  pollTargetsChanged: boolean;
  /** Replicas no record knows any more (a follower's view): out of this gateway's table if handed off. */
  removed: ReplicaEntry[];
  /** Replica records the leader changed in memory to follow an operator's change (write them back). */
  rewritten: ReplicaRecord[];
}

function replace<K, V>(map: Map<K, V>, entries: Iterable<[K, V]>): void {
  map.clear();
  for (const [k, v] of entries) map.set(k, v);
}

/**
 * Fold a snapshot into the manager's memory. `replicas`: take the replica
 * records too (a follower, or a gateway that has just become the leader);
 * otherwise keep its own.
 */
export function applySnapshot(state: FleetState, snap: StoreSnapshot, opts: { replicas: boolean; now: number }): AppliedSnapshot {
  const cancelled = snap.drains.filter((d) => d.state === "cancelled" && state.drains.get(d.node)?.state === "running").map((d) => d.node);
  replace(
    state.models,
    snap.models.map((m) => [m.spec.name, m]),
  );
  replace(
    state.cordons,
    snap.cordons.map((c) => [c.node, c]),
  );
  replace(
    state.drains,
    snap.drains.map((d) => [d.node, d]),
  );
  let pollTargetsChanged = false;
  for (const n of snap.nodes) if (!state.registry.isConfigured(n.name) && state.registry.register(n, opts.now)) pollTargetsChanged = true;
  const removed: ReplicaEntry[] = [];
  const rewritten: ReplicaRecord[] = [];
  if (opts.replicas) {
    const stored = new Map(snap.replicas.map((r) => [r.id, r]));
    for (const [id, entry] of state.replicas) {
      const record = stored.get(id);
      if (record === undefined) {
        state.replicas.delete(id);
        removed.push(entry);
      } else {
        entry.record = record;
      }
    }
    for (const r of snap.replicas) if (!state.replicas.has(r.id)) state.adoptRecord(r, opts.now);
  } else if (cancelled.length > 0) {
    // The same change FleetOperations.uncordon makes where it runs: the drained replicas stay.
    for (const e of state.replicas.values()) {
      if (e.record.draining?.reason === "drain" && e.record.shards.some((s) => cancelled.includes(s.node))) {
        e.record = { ...e.record, draining: null };
        rewritten.push(e.record);
      }
    }
  }
  return { pollTargetsChanged, removed, rewritten };
}
