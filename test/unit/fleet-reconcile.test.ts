/** The reconcile planner and the drain state machine over plain data: every decision, one at a time. */
import { describe, expect, test } from "bun:test";
import { fleetModelSchema, toFleetModel } from "../../src/config/fleet-schema.ts";
import type { FleetModelSpec } from "../../src/config/types.ts";
import type { PlacementNode } from "../../src/control/placement-types.ts";
import { type Action, chooseVictims, planReconcile, type ReconcileView, type ReplicaView } from "../../src/control/reconcile.ts";
import type { DrainOp, ReplicaRecord } from "../../src/control/types.ts";
import { placementGpus } from "../fixtures/fleet/gpus.ts";

const NOW = 1_000_000;
const GRACE = 60_000;

function model(name: string, replicas: number): FleetModelSpec {
  return toFleetModel(fleetModelSchema.parse({ name, engine: "sim", replicas }));
}

function record(id: string, node: string, over: Partial<ReplicaRecord> = {}): ReplicaRecord {
  return {
    id,
    model: "m",
    pool: "default",
    engine: "sim",
    shards: [{ node, agentId: id, gpus: [0], rank: 0, spec: { engine: "sim", model: "m", gpus: [0], tensorParallel: 1, pipelineParallel: 1, extraArgs: [] } }],
    createdAt: 0,
    draining: null,
    ...over,
  };
}

/** A Ready replica in rotation, with overrides. */
function replica(id: string, node: string, over: Partial<ReplicaView> = {}, rec: Partial<ReplicaRecord> = {}): ReplicaView {
  return {
    record: record(id, node, rec),
    phase: "Ready",
    busy: false,
    handedOff: true,
    drainingSignalled: false,
    inflight: 0,
    gatewayReady: true,
    launchFailures: 0,
    ...over,
  };
}

function nodes(...names: string[]): PlacementNode[] {
  return names.map((name, i) => ({ name, state: "Ready", cordoned: false, transports: [], gpus: placementGpus("h100", 2, `n${i}`), modelReplicas: {} }));
}

/** A planner input; agents default to one per node, in the node's state, running no fleet replica. */
function view(over: Partial<ReconcileView>): ReconcileView {
  const v: ReconcileView = {
    now: NOW,
    models: [model("m", 2)],
    replicas: [],
    nodes: nodes("a", "b"),
    agents: [],
    drains: [],
    backoffUntil: {},
    drainGraceMs: GRACE,
    maxLaunchFailures: 3,
    ...over,
  };
  return over.agents ? v : { ...v, agents: v.nodes.map((n) => ({ node: n.name, state: n.state, fleetIds: [] })) };
}

const kinds = (actions: Action[]) =>
  actions.map((a) =>
    "replica" in a
      ? `${a.kind} ${a.replica}`
      : a.kind === "create"
        ? `create ${a.shards.map((s) => s.node).join("+")}`
        : "node" in a
          ? `${a.kind} ${a.node}`
          : `${a.kind} ${a.model}`,
  );
const draining = (since: number, reason: "drain" | "scale-down" | "model-removed" = "drain", graceMs = GRACE) => ({ draining: { since, reason, graceMs } });

describe("counting replicas against desired", () => {
  test("too few: place the missing ones (spread over nodes)", () => {
    expect(kinds(planReconcile(view({})))).toEqual(["create a", "create b"]);
    expect(kinds(planReconcile(view({ replicas: [replica("r1", "a")] })))).toEqual(["create b"]);
  });

  test("no new replica during the model's failure backoff, nor while a failed one is being given up on", () => {
    expect(kinds(planReconcile(view({ backoffUntil: { m: NOW + 1 } })))).toEqual([]);
    expect(kinds(planReconcile(view({ backoffUntil: { m: NOW } })))).toEqual(["create a", "create b"]);
    expect(kinds(planReconcile(view({ replicas: [replica("r1", "a"), replica("bad", "b", { phase: "Failed", handedOff: false })] })))).toEqual(["fail bad"]);
  });

  test("too many: the surplus leaves, not-Ready first, then from the most crowded node, newest first", () => {
    const rs = [
      replica("old-a", "a", {}, { createdAt: 1 }),
      replica("new-a", "a", {}, { createdAt: 5 }),
      replica("mid-a", "a", {}, { createdAt: 3 }),
      replica("b", "b", {}, { createdAt: 9 }),
      replica("starting", "c", { phase: "Starting", handedOff: false }, { createdAt: 0 }),
    ];
    expect(chooseVictims(rs, 5).map((r) => r.record.id)).toEqual(["starting", "new-a", "mid-a", "old-a", "b"]);
    const actions = planReconcile(view({ models: [model("m", 2)], replicas: rs }));
    expect(actions.filter((a) => a.kind === "mark-draining")).toEqual([
      { kind: "mark-draining", replica: "starting", reason: "scale-down", graceMs: GRACE },
      { kind: "mark-draining", replica: "new-a", reason: "scale-down", graceMs: GRACE },
      { kind: "mark-draining", replica: "mid-a", reason: "scale-down", graceMs: GRACE },
    ]);
  });

  test("a model no longer desired: all its replicas leave", () => {
    expect(planReconcile(view({ models: [], replicas: [replica("r1", "a")] }))).toEqual([
      { kind: "mark-draining", replica: "r1", reason: "model-removed", graceMs: GRACE },
    ]);
  });

  test("Lost and Failed replicas do not count: replacements are placed", () => {
    const bGone = nodes("a", "b").map((n) => (n.name === "b" ? { ...n, state: "NotReady" as const } : n));
    expect(kinds(planReconcile(view({ nodes: bGone, replicas: [replica("r1", "a"), replica("lost", "b", { phase: "Lost" })] })))).toEqual([
      "remove-endpoint lost",
      "create a",
    ]);
  });
});

describe("one replica's lifecycle", () => {
  test("Ready and not in the gateway → add; in the gateway but no longer Ready → remove", () => {
    expect(kinds(planReconcile(view({ replicas: [replica("r1", "a", { handedOff: false }), replica("r2", "b", { phase: "Starting" })] })))).toEqual([
      "add-endpoint r1",
      "remove-endpoint r2",
    ]);
  });

  test("Missing: launched again; given up after repeated refusals; replaced elsewhere when its node is cordoned", () => {
    const missing = (over: Partial<ReplicaView> = {}) => replica("r1", "a", { phase: "Missing", handedOff: false, ...over });
    const full = view({ models: [model("m", 1)] });
    expect(planReconcile({ ...full, replicas: [missing()] })).toEqual([{ kind: "launch", replica: "r1", agentIds: ["r1"] }]);
    expect(kinds(planReconcile({ ...full, replicas: [missing({ launchFailures: 3 })] }))).toEqual(["fail r1"]);
    const cordoned = nodes("a", "b").map((n) => ({ ...n, cordoned: n.name === "a" }));
    expect(kinds(planReconcile({ ...full, nodes: cordoned, replicas: [missing()] }))).toEqual(["stop r1"]);
  });

  test("Lost on a node that is no longer registered: forgotten (a NotReady node may come back: kept)", () => {
    const lost = replica("r1", "gone", { phase: "Lost", handedOff: false });
    const agents = [
      { node: "a", state: "Ready" as const, fleetIds: [] },
      { node: "b", state: "NotReady" as const, fleetIds: [] },
    ];
    expect(kinds(planReconcile(view({ models: [model("m", 0)], agents, replicas: [lost] })))).toEqual(["forget r1"]);
    expect(kinds(planReconcile(view({ models: [model("m", 0)], agents, replicas: [replica("r2", "b", { phase: "Lost", handedOff: false })] })))).toEqual([]);
  });

  test("an agent call in flight: nothing else that calls an agent is planned for that replica", () => {
    const busy = view({ models: [model("m", 1)], replicas: [replica("r1", "a", { phase: "Missing", handedOff: false, busy: true })] });
    expect(planReconcile(busy)).toEqual([]);
  });
});

describe("drain", () => {
  const op: DrainOp = { node: "a", startedAt: NOW - 10, graceMs: 5_000, state: "running", finishedAt: null };

  test("replicas on a draining node are marked with the drain's grace, and their replacements placed in the same round", () => {
    const actions = planReconcile(
      view({ drains: [op], nodes: nodes("a", "b").map((n) => ({ ...n, cordoned: n.name === "a" })), replicas: [replica("ra", "a"), replica("rb", "b")] }),
    );
    expect(actions[0]).toEqual({ kind: "mark-draining", replica: "ra", reason: "drain", graceMs: 5_000 });
    expect(kinds(actions)).toEqual(["mark-draining ra", "create b"]);
  });

  test("the leaving replica stays in rotation until its replacement serves, then leaves it, and stops once its in-flight count is 0", () => {
    const leaving = (over: Partial<ReplicaView>) => replica("ra", "a", over, draining(NOW - 100));
    const other = replica("rb", "b");
    const replacement = (over: Partial<ReplicaView> = {}) => replica("new", "b", over);
    // Another replica serves, but 2 are desired: without ra only 1 would.
    expect(kinds(planReconcile(view({ replicas: [leaving({}), other, replacement({ phase: "Starting", handedOff: false })] })))).toEqual([]);
    expect(kinds(planReconcile(view({ replicas: [leaving({}), other, replacement({ gatewayReady: false })] })))).toEqual([]);
    expect(kinds(planReconcile(view({ replicas: [leaving({}), other, replacement()] })))).toEqual(["signal-draining ra"]);
    // Replacement serving, requests still open: wait.
    expect(kinds(planReconcile(view({ replicas: [leaving({ drainingSignalled: true, inflight: 3 }), other, replacement()] })))).toEqual([]);
    expect(kinds(planReconcile(view({ replicas: [leaving({ drainingSignalled: true, inflight: 0 }), other, replacement()] })))).toEqual(["stop ra"]);
    // Out of rotation, in-flight 0, but the replacement no longer serves (the gateway's view): back into rotation, not stopped.
    expect(kinds(planReconcile(view({ replicas: [leaving({ drainingSignalled: true }), other, replacement({ gatewayReady: false })] })))).toEqual([
      "signal-draining ra",
    ]);
  });

  test("the last replica serving its model stays in rotation until a replacement serves", () => {
    const m1 = [model("m", 1)];
    const last = replica("ra", "a", {}, draining(NOW - 100));
    expect(kinds(planReconcile(view({ models: m1, replicas: [last, replica("new", "b", { phase: "Starting", handedOff: false })] })))).toEqual([]);
    expect(kinds(planReconcile(view({ models: m1, replicas: [last, replica("new", "b")] })))).toEqual(["signal-draining ra"]);
  });

  test("after a gateway restart mid-drain, a Ready leaving replica goes back to the gateway (draining unless it stands in for a replacement) and is not stopped early", () => {
    const m1 = [model("m", 1)];
    const restarted = replica("ra", "a", { handedOff: false }, draining(NOW - 100));
    const loading = replica("new", "b", { phase: "Starting", handedOff: false });
    expect(planReconcile(view({ models: m1, replicas: [restarted, loading] }))).toEqual([{ kind: "add-endpoint", replica: "ra", draining: false }]);
    const m2 = [model("m", 2)];
    expect(planReconcile(view({ models: m2, replicas: [restarted, replica("rb", "b"), loading] }))).toEqual([
      { kind: "add-endpoint", replica: "ra", draining: false },
    ]);
  });

  test("every replica on a drained node stays in rotation until its own replacement serves: the model never serves fewer than desired", () => {
    const m3 = [model("m", 3)];
    const a1 = (over: Partial<ReplicaView> = {}) => replica("a1", "a", over, { ...draining(NOW - 100), createdAt: 1 });
    const a2 = (over: Partial<ReplicaView> = {}) => replica("a2", "a", over, { ...draining(NOW - 100), createdAt: 2 });
    const b1 = replica("b1", "b");
    const starting = (id: string) => replica(id, "b", { phase: "Starting", handedOff: false });
    // Both replacements loading: both originals stay in rotation (3 of 3 serving).
    expect(kinds(planReconcile(view({ models: m3, replicas: [a1(), a2(), b1, starting("n1"), starting("n2")] })))).toEqual([]);
    // One replacement serves: one original (the younger) leaves rotation, the other stands in for the second.
    expect(kinds(planReconcile(view({ models: m3, replicas: [a1(), a2(), b1, replica("n1", "b"), starting("n2")] })))).toEqual(["signal-draining a2"]);
    // Neither stops while the second replacement loads, whatever their in-flight counts.
    expect(kinds(planReconcile(view({ models: m3, replicas: [a1(), a2({ drainingSignalled: true }), b1, replica("n1", "b"), starting("n2")] })))).toEqual([]);
    // Both serve: the last original leaves rotation; the one out of rotation with nothing in flight stops.
    expect(kinds(planReconcile(view({ models: m3, replicas: [a1(), a2({ drainingSignalled: true }), b1, replica("n1", "b"), replica("n2", "b")] })))).toEqual([
      "signal-draining a1",
      "stop a2",
    ]);
    // A replacement that stops serving brings an original back into rotation.
    expect(
      kinds(
        planReconcile(
          view({
            models: m3,
            replicas: [a1({ drainingSignalled: true }), a2({ drainingSignalled: true }), b1, replica("n1", "b", { phase: "Starting" }), replica("n2", "b")],
          }),
        ),
      ),
    ).toEqual(["signal-draining a1", "remove-endpoint n1"]);
  });

  test("a drained replica with no room for its replacement keeps serving until the grace period ends, then stops", () => {
    const m2 = [model("m", 2)];
    const full = nodes("a", "b").map((n) => ({ ...n, cordoned: n.name === "a", gpus: n.gpus.map((g) => ({ ...g, usedBy: "someone-else" })) }));
    const held = (since: number) => replica("ra", "a", {}, draining(since));
    const during = planReconcile(view({ models: m2, nodes: full, replicas: [held(NOW - 100), replica("rb", "b")] }));
    expect(during).toEqual([{ kind: "replacement-unplaced", model: "m", missing: 1, reason: expect.any(String) }]);
    const over = planReconcile(view({ models: m2, nodes: full, replicas: [held(NOW - GRACE), replica("rb", "b")] }));
    expect(over[0]).toEqual({
      kind: "stop",
      replica: "ra",
      reason: expect.stringContaining("grace period over before a replacement served"),
      short: { serving: 1, desired: 2 },
    });
  });

  test("a leaving replica being stopped (out of the gateway, DELETE on its way) is not handed back while the engine still answers", () => {
    const stopping = replica("ra", "a", { handedOff: false, busy: true }, draining(NOW - 100));
    expect(kinds(planReconcile(view({ replicas: [stopping, replica("rb", "b"), replica("new", "b")] })))).toEqual([]);
  });

  test("the grace period bounds the wait, whatever it waits for", () => {
    const stuck = replica("ra", "a", { drainingSignalled: true, inflight: 7 }, draining(NOW - GRACE));
    expect(kinds(planReconcile(view({ models: [model("m", 1)], replicas: [stuck] })))).toContain("stop ra");
    const lastServing = replica("ra", "a", {}, draining(NOW - GRACE));
    expect(kinds(planReconcile(view({ models: [model("m", 1)], replicas: [lastServing] })))).toContain("stop ra");
  });

  test("scale-down needs no replacement: in-flight 0 is enough", () => {
    const r = replica("ra", "a", { drainingSignalled: true }, draining(NOW - 1, "scale-down"));
    expect(kinds(planReconcile(view({ models: [model("m", 0)], replicas: [r] })))).toEqual(["stop ra"]);
  });

  test("a leaving replica on an unreachable node is forgotten (its agent cleans it up as an orphan later)", () => {
    expect(kinds(planReconcile(view({ models: [model("m", 0)], replicas: [replica("ra", "a", { phase: "Lost" }, draining(NOW - 1))] })))).toEqual([
      "forget ra",
    ]);
  });

  test("the drain finishes once no replica is left on the node", () => {
    expect(kinds(planReconcile(view({ drains: [op], replicas: [replica("r1", "b"), replica("r2", "b")] })))).toEqual(["finish-drain a"]);
  });

  test("a cancelled drain puts a replica still in the gateway back into rotation", () => {
    expect(kinds(planReconcile(view({ replicas: [replica("ra", "a", { drainingSignalled: true }), replica("rb", "b")] })))).toEqual(["signal-draining ra"]);
  });
});

describe("orphans", () => {
  test("a fleet replica an agent runs that no record knows is stopped, on Ready nodes only", () => {
    const actions = planReconcile(
      view({
        models: [model("m", 1)],
        replicas: [replica("r1", "a")],
        agents: [
          { node: "a", state: "Ready", fleetIds: ["r1", "fl-m-orphan"] },
          { node: "b", state: "NotReady", fleetIds: ["fl-m-other"] },
        ],
      }),
    );
    expect(actions).toEqual([{ kind: "delete-orphan", node: "a", agentId: "fl-m-orphan" }]);
  });
});
