/**
 * The reconcile planner, pure: from desired models, the replicas the control
 * plane knows (with their phases) and the nodes, the actions that move the
 * fleet toward desired. The shell (fleet-manager.ts) performs them and plans
 * again; nothing here waits or calls out.
 *
 * Counting: a replica is active when it is not leaving (draining) and not
 * Failed or Lost. Fewer active than desired → place more (after the model's
 * failure backoff); more → the surplus leaves, chosen as Kubernetes'
 * ReplicaSet does: not-Ready first, then the node holding most replicas of
 * the model, then the newest.
 *
 * Leaving (drain, scale-down, model removed): a replica first leaves
 * rotation (setDraining) — except, on a drain, while its model has fewer
 * serving replicas than desired without it: then it stays in rotation until
 * a replacement serves — and is stopped once (its model has its desired
 * serving replicas again, for a drain) and its in-flight count is 0, or
 * when the grace period is over, whatever it waits for.
 */
import type { FleetModelSpec } from "../config/types.ts";
import { place } from "./placement.ts";
import type { ChosenShard, PlacementNode, PlacementResult } from "./placement-types.ts";
import type { DrainOp, DrainReason, NodeState, ReplicaPhase, ReplicaRecord } from "./types.ts";

export interface ReplicaView {
  record: ReplicaRecord;
  phase: ReplicaPhase;
  /** An agent call for it is in flight: plan nothing that calls an agent. */
  busy: boolean;
  /** Handed to the gateway (addEndpoint) and not removed since. */
  handedOff: boolean;
  /** setDraining(true) was called. */
  drainingSignalled: boolean;
  /** Requests open on it in the gateway (0 when not handed off). */
  inflight: number;
  /** The gateway's own health poll sees it ready (true when the gateway does not say). */
  gatewayReady: boolean;
  /** Relaunches of a missing shard refused so far. */
  launchFailures: number;
}

export interface ReconcileView {
  now: number;
  models: readonly FleetModelSpec[];
  replicas: readonly ReplicaView[];
  /** Placement input: every node, with GPUs taken by any replica (ours or not); replicas per model are counted here. */
  nodes: readonly PlacementNode[];
  /** Per node: its state and the ids of fleet replicas its agent reports (orphan detection). */
  agents: readonly { node: string; state: NodeState; fleetIds: readonly string[] }[];
  /** Running drain operations. */
  drains: readonly DrainOp[];
  /** Per model: no new replica before this time (failure backoff). */
  backoffUntil: Readonly<Record<string, number>>;
  /** Grace period of a scale-down (a drain brings its own). */
  drainGraceMs: number;
  /** Relaunch refusals after which a missing replica is given up on. */
  maxLaunchFailures: number;
}

export type Action =
  | { kind: "create"; model: string; shards: ChosenShard[] }
  /** Launch (again) the shards an agent does not run. */
  | { kind: "launch"; replica: string; agentIds: string[] }
  /** Give up: out of rotation, stop its shards, keep its log tail, back off the model. */
  | { kind: "fail"; replica: string; reason: string }
  /** `short`: a drain's grace period ended before a replacement served, and its model serves fewer than desired without it. */
  | { kind: "stop"; replica: string; reason: string; short?: { serving: number; desired: number } }
  /** Drop the record without calling an agent that cannot answer (its leftovers are cleaned as orphans later). */
  | { kind: "forget"; replica: string; reason: string }
  | { kind: "mark-draining"; replica: string; reason: DrainReason; graceMs: number }
  /** Into the gateway; `draining` when it is leaving (back after a restart): no new requests from the start. */
  | { kind: "add-endpoint"; replica: string; draining: boolean }
  | { kind: "remove-endpoint"; replica: string }
  | { kind: "signal-draining"; replica: string; draining: boolean }
  | { kind: "delete-orphan"; node: string; agentId: string }
  | { kind: "finish-drain"; node: string }
  /** A drain's replacements find no room: its originals keep serving until the grace period ends (said once by the shell). */
  | { kind: "replacement-unplaced"; model: string; missing: number; reason: string };

const ACTIVE: ReadonlySet<ReplicaPhase> = new Set(["Pending", "Starting", "Ready", "Missing"]);

export function isActive(r: ReplicaView): boolean {
  return r.record.draining === null && ACTIVE.has(r.phase);
}

/** In rotation and answering: what a drain waits for the model to have again. */
export function isServing(r: ReplicaView): boolean {
  return r.phase === "Ready" && r.handedOff && r.gatewayReady && !r.drainingSignalled;
}

function desiredCount(models: readonly FleetModelSpec[], model: string): number {
  return models.find((m) => m.name === model)?.replicas ?? 0;
}

/** Surplus replicas to remove, Kubernetes ReplicaSet order: not Ready, crowded node, newest. */
export function chooseVictims(active: readonly ReplicaView[], count: number): ReplicaView[] {
  const perNode = new Map<string, number>();
  for (const r of active) perNode.set(r.record.shards[0]!.node, (perNode.get(r.record.shards[0]!.node) ?? 0) + 1);
  return [...active]
    .sort((a, b) => {
      const ready = Number(a.phase === "Ready") - Number(b.phase === "Ready");
      if (ready !== 0) return ready;
      const crowd = (perNode.get(b.record.shards[0]!.node) ?? 0) - (perNode.get(a.record.shards[0]!.node) ?? 0);
      if (crowd !== 0) return crowd;
      return b.record.createdAt - a.record.createdAt || (a.record.id < b.record.id ? -1 : 1);
    })
    .slice(0, Math.max(0, count));
}

/** Where a leaving replica stands: what still holds it (all false/zero: it may stop). */
interface LeaveState {
  /**
   * A drained replica stays in rotation while it stands in for a replacement
   * that does not serve yet: the model keeps its desired serving count
   * during the drain (or all it had, when it had fewer).
   */
  holdsRotation: boolean;
  /** Replicas of the model serving, not leaving, and how many are desired. */
  serving: number;
  desired: number;
  /** Waiting for the model to have its desired serving replicas again (drain only). */
  awaitingReplacement: boolean;
  /** Still in rotation (not yet told to the gateway as draining). */
  inRotation: boolean;
  /** Requests still open on it in the gateway. */
  inflight: number;
  graceOver: boolean;
  graceLeftMs: number;
}

/**
 * Whether drained replica `r` is one of the `desired - serving` drained
 * replicas of its model kept in rotation. Every replica on a drained node is
 * marked at once, while replacements come one by one (and some may find no
 * room): taking them all out together would drop the model below desired
 * until the last replacement serves. The ones already in rotation are kept
 * first (no flapping), then the oldest; one not Ready cannot stand in.
 */
function holdsRotation(r: ReplicaView, others: readonly ReplicaView[], serving: number, desired: number): boolean {
  const slots = desired - serving;
  if (r.phase !== "Ready" || slots <= 0) return false;
  const inRotation = (v: ReplicaView) => v.handedOff && !v.drainingSignalled && v.gatewayReady;
  const before = (a: ReplicaView, b: ReplicaView) =>
    Number(inRotation(b)) - Number(inRotation(a)) ||
    a.record.createdAt - b.record.createdAt ||
    (a.record.id < b.record.id ? -1 : a.record.id > b.record.id ? 1 : 0);
  const ahead = others.filter((o) => o.record.draining?.reason === "drain" && o.phase === "Ready" && before(o, r) < 0).length;
  return ahead < slots;
}

export function leaveState(r: ReplicaView, view: ReconcileView): LeaveState {
  const leaving = r.record.draining!;
  const model = r.record.model;
  const others = view.replicas.filter((o) => o !== r && o.record.model === model);
  const serving = others.filter((o) => isActive(o) && isServing(o)).length;
  const desired = desiredCount(view.models, model);
  const graceLeftMs = Math.max(0, leaving.since + leaving.graceMs - view.now);
  return {
    holdsRotation: leaving.reason === "drain" && holdsRotation(r, others, serving, desired),
    serving,
    desired,
    awaitingReplacement: leaving.reason === "drain" && r.phase === "Ready" && serving < desired,
    inRotation: r.handedOff && !r.drainingSignalled,
    inflight: r.handedOff ? r.inflight : 0,
    graceOver: graceLeftMs === 0,
    graceLeftMs,
  };
}

function planLeaving(r: ReplicaView, view: ReconcileView, out: Action[]): void {
  const leaving = r.record.draining!;
  if (r.phase === "Lost") return void out.push({ kind: "forget", replica: r.record.id, reason: `${leaving.reason}: its node is unreachable` });
  const s = leaveState(r, view);
  if (!r.busy && (s.graceOver || (!s.awaitingReplacement && !s.inRotation && s.inflight === 0))) {
    if (s.graceOver && s.awaitingReplacement) {
      const short = { serving: s.serving, desired: s.desired };
      return void out.push({
        kind: "stop",
        replica: r.record.id,
        reason: `${leaving.reason}: grace period over before a replacement served (${s.serving} of ${s.desired} serving without it)`,
        short,
      });
    }
    return void out.push({ kind: "stop", replica: r.record.id, reason: s.graceOver ? `${leaving.reason}: grace period over` : leaving.reason });
  }
  // A leaving replica still Ready but not in the gateway (the gateway restarted mid-drain) goes back, draining unless it stands in for a replacement.
  // Not while busy: that is a stop in progress (taken out of the gateway, DELETE on its way), and
  // handing it back then would leave an endpoint in the table after its record is gone.
  if (r.phase === "Ready" && !r.handedOff && !r.busy) out.push({ kind: "add-endpoint", replica: r.record.id, draining: !s.holdsRotation });
  else if (r.handedOff && r.drainingSignalled === s.holdsRotation) out.push({ kind: "signal-draining", replica: r.record.id, draining: !s.holdsRotation });
}

function planStaying(r: ReplicaView, view: ReconcileView, cordoned: ReadonlySet<string>, out: Action[]): void {
  const id = r.record.id;
  if (r.phase !== "Ready" && r.handedOff) out.push({ kind: "remove-endpoint", replica: id });
  if (r.drainingSignalled) out.push({ kind: "signal-draining", replica: id, draining: false });
  if (r.busy) return;
  switch (r.phase) {
    case "Ready":
      if (!r.handedOff) out.push({ kind: "add-endpoint", replica: id, draining: false });
      return;
    case "Failed":
      return void out.push({ kind: "fail", replica: id, reason: "failed" });
    case "Missing": {
      if (r.launchFailures >= view.maxLaunchFailures) return void out.push({ kind: "fail", replica: id, reason: `relaunch refused ${r.launchFailures} times` });
      // Relaunching on a cordoned node would be a new placement there: replace it elsewhere instead.
      if (r.record.shards.some((s) => cordoned.has(s.node))) return void out.push({ kind: "stop", replica: id, reason: "gone from a cordoned node" });
      // A PUT of a shard the agent still runs is a no-op there ("unchanged"), so every shard is sent again.
      return void out.push({ kind: "launch", replica: id, agentIds: r.record.shards.map((s) => s.agentId) });
    }
    case "Lost":
      // A node that is no longer registered (removed from the config) will not come back to be asked.
      if (r.record.shards.some((s) => !view.agents.some((a) => a.node === s.node)))
        out.push({ kind: "forget", replica: id, reason: "its node is no longer registered" });
      return;
    case "Pending":
    case "Starting":
      return;
    default: {
      const unreachable: never = r.phase;
      throw new Error(`unknown phase ${String(unreachable)}`);
    }
  }
}

/** Placement's spread input: active replicas of each model per node (a replica spanning nodes counts on each). */
export function withModelCounts(nodes: readonly PlacementNode[], replicas: readonly ReplicaView[]): PlacementNode[] {
  return nodes.map((n) => {
    const modelReplicas: Record<string, number> = {};
    for (const r of replicas) {
      if (isActive(r) && r.record.shards.some((s) => s.node === n.name)) modelReplicas[r.record.model] = (modelReplicas[r.record.model] ?? 0) + 1;
    }
    return { ...n, modelReplicas };
  });
}

function planCounts(view: ReconcileView, out: Action[]): void {
  const nodes = withModelCounts(view.nodes, view.replicas);
  const models = new Set([...view.models.map((m) => m.name), ...view.replicas.map((r) => r.record.model)]);
  for (const name of [...models].sort()) {
    const spec = view.models.find((m) => m.name === name);
    const active = view.replicas.filter((r) => r.record.model === name && isActive(r));
    const want = spec?.replicas ?? 0;
    if (active.length > want) {
      const reason: DrainReason = spec ? "scale-down" : "model-removed";
      for (const v of chooseVictims(active, active.length - want))
        out.push({ kind: "mark-draining", replica: v.record.id, reason, graceMs: view.drainGraceMs });
    } else if (
      spec &&
      active.length < want &&
      view.now >= (view.backoffUntil[name] ?? 0) &&
      !view.replicas.some((r) => r.record.model === name && r.phase === "Failed")
    ) {
      // A failing replica is given up on first (which sets the backoff); its replacement comes after.
      const result = placeModel(spec, want - active.length, nodes);
      for (const shards of result.placements) out.push({ kind: "create", model: name, shards });
      const drained = view.replicas.some((r) => r.record.model === name && r.record.draining?.reason === "drain");
      if (drained && result.unplaced > 0)
        out.push({ kind: "replacement-unplaced", model: name, missing: result.unplaced, reason: result.unplacedReason ?? "no node fits" });
    }
  }
}

/** Placement of `count` more replicas of `spec` (also what explain-placement shows). */
export function placeModel(spec: FleetModelSpec, count: number, nodes: readonly PlacementNode[]): PlacementResult {
  return place(
    {
      model: spec.name,
      tensorParallel: spec.tensorParallel,
      nodesPerReplica: spec.nodesPerReplica,
      gpuClass: spec.gpuClass,
      minGpuMemoryGiB: spec.minGpuMemoryGiB,
      quantization: spec.quantization,
      count,
    },
    nodes,
  );
}

export function planReconcile(view: ReconcileView): Action[] {
  const out: Action[] = [];
  const cordoned = new Set(view.nodes.filter((n) => n.cordoned).map((n) => n.name));
  const draining = new Map(view.drains.filter((d) => d.state === "running").map((d) => [d.node, d]));
  for (const r of view.replicas) {
    const op = r.record.draining === null ? r.record.shards.map((s) => draining.get(s.node)).find((d) => d !== undefined) : undefined;
    if (op) {
      out.push({ kind: "mark-draining", replica: r.record.id, reason: "drain", graceMs: op.graceMs });
    } else if (r.record.draining !== null) {
      planLeaving(r, view, out);
    } else {
      planStaying(r, view, cordoned, out);
    }
  }
  for (const node of draining.keys()) {
    if (!view.replicas.some((r) => r.record.shards.some((s) => s.node === node))) out.push({ kind: "finish-drain", node });
  }
  const known = new Set(view.replicas.flatMap((r) => r.record.shards.map((s) => `${s.node}\u0000${s.agentId}`)));
  for (const a of view.agents) {
    if (a.state !== "Ready") continue;
    for (const id of a.fleetIds) if (!known.has(`${a.node}\u0000${id}`)) out.push({ kind: "delete-orphan", node: a.node, agentId: id });
  }
  // Replicas just marked draining leave the count this round: their replacements are planned at once.
  const marked = new Map(out.flatMap((a) => (a.kind === "mark-draining" ? [[a.replica, a] as const] : [])));
  const counted: ReconcileView = {
    ...view,
    replicas: view.replicas.map((r) => {
      const m = marked.get(r.record.id);
      return m ? { ...r, record: { ...r.record, draining: { since: view.now, reason: m.reason, graceMs: m.graceMs } } } : r;
    }),
  };
  planCounts(counted, out);
  return out;
}
