/**
 * The fleet manager in the twin: replicas of one model placed on GPU nodes
 * by the control plane's own reconcile planner (src/control/reconcile.ts:
 * placement, replacement, scale-down and drain decisions), which the twin
 * performs on its engine slots, each replica starting up for the model's
 * start-up time before it is Ready and handed to the gateway.
 *
 * The twin stands in for the agents and the store: a replica is Starting
 * from its launch until the start-up time has passed, then Ready; Missing
 * once its engine's process died (a `kill` fault), launched again by the
 * planner. Its engine is one of the fleet's slots (twin-fleet.ts), down
 * while no replica holds it. The planner runs every
 * `fleet.reconcile_interval_ms`, as the fleet manager's tick does.
 */
import type { FleetModelSpec } from "../config/types.ts";
import type { PlacementNode } from "../control/placement-types.ts";
import { type Action, planReconcile, type ReplicaView } from "../control/reconcile.ts";
import { buildReplicaRecord } from "../control/replica-builder.ts";
import type { DrainOp, ReplicaPhase, ReplicaRecord } from "../control/types.ts";
import { I } from "../shared/endpoint-table.ts";
import type { EventQueue } from "./event-queue.ts";
import type { TwinEngine } from "./twin-engine.ts";
import type { TwinGateway } from "./twin-gateway.ts";

/** What the fleet manager drives: the clock, the gateway's tables and flags, the engine slots. */
interface FleetParts {
  readonly clock: EventQueue;
  readonly gateway: TwinGateway;
  readonly engines: readonly TwinEngine[];
}

/** The GPU nodes of a twin fleet: `count` nodes of `gpus` GPUs of one class. */
export interface TwinNodes {
  count: number;
  gpus: number;
  gpuClass: string;
}

interface TwinReplica {
  record: ReplicaRecord;
  phase: ReplicaPhase;
  /** When its launch's start-up ends (Starting until then). */
  readyAt: number;
  /** When it was last launched. */
  launchedAt: number;
  /** The engine slot it runs on. */
  slot: number;
  handedOff: boolean;
  drainingSignalled: boolean;
}

/** What the fleet did over a run: its replicas, their GPU time, and the serving count over time. */
export interface TwinFleetReport {
  nodes: number;
  gpus_per_node: number;
  tensor_parallel: number;
  startup_s: number;
  desired: number;
  launched: number;
  stopped: number;
  /** GPUs held by replicas (from launch to stop) × time, hours. */
  gpu_hours: number;
  /** Replicas placed and not leaving (starting or ready), averaged over the run's time. */
  provisioned_mean: number;
  /** Replicas serving (Ready and in rotation), sampled at every reconcile tick: mean, min, max. */
  serving: { mean: number; min: number; max: number };
  /** Every action the planner took, with its time (simulated ms): the first MAX_REPORTED_ACTIONS of them, and how many there were. */
  actions: { at_ms: number; kind: Action["kind"]; replica?: string; node?: string; reason?: string }[];
  actions_total: number;
}

/** More actions than this in a report are summarized by their count. */
const MAX_REPORTED_ACTIONS = 500;

export class TwinFleetManager {
  private readonly replicas = new Map<string, TwinReplica>();
  private readonly nodes: PlacementNode[];
  private readonly drains: DrainOp[] = [];
  private readonly freeSlots: number[];
  private nextId = 1;
  private stopped = false;
  /** The first reconcile of a run: what it launches is already up. */
  private warming = false;
  private gpuMs = 0;
  private lastAccountAt = 0;
  private launched = 0;
  private stoppedCount = 0;
  private servingSum = 0;
  private servingTicks = 0;
  private servingMin = Infinity;
  private servingMax = 0;
  private readonly actions: TwinFleetReport["actions"] = [];
  private actionCount = 0;

  /** Replicas placed and not leaving, integrated over time (ms), for the time-averaged count. */
  private provisionedMs = 0;
  /** Where GPU time and the time-averaged count start (restartAccounting). */
  private accountFrom = 0;
  /** The last start-up measured, launch to Ready, ms. */
  private lastStartupMs: number | undefined;

  constructor(
    private readonly fleet: FleetParts,
    private spec: FleetModelSpec,
    private readonly hw: TwinNodes,
  ) {
    this.nodes = Array.from({ length: hw.count }, (_, n) => ({
      name: `node-${n}`,
      state: "Ready",
      cordoned: false,
      transports: null,
      gpus: Array.from({ length: hw.gpus }, (_, g) => ({
        index: g,
        uuid: `GPU-twin-${n}-${g}`,
        class: hw.gpuClass,
        memoryGiB: null,
        computeCapability: null,
        faults: [],
        usedBy: null,
      })),
      modelReplicas: {},
    }));
    // Every slot is down until a replica runs on it.
    this.freeSlots = fleet.engines.map((_, i) => i).reverse();
    for (const e of fleet.engines) e.kill();
  }

  /** The slots a fleet of `hw` can run replicas of `tensorParallel` GPUs on. */
  static slotsFor(hw: TwinNodes, tensorParallel: number): number {
    return hw.count * Math.floor(hw.gpus / tensorParallel);
  }

  /**
   * Reconcile now and then every `fleet.reconcile_interval_ms`, as the
   * fleet manager's timer does. The replicas the first reconcile places are
   * up when the run starts (a bench starts its load on a fleet that is
   * ready); later ones start up for the model's start-up time.
   */
  start(): void {
    this.warming = true;
    this.plan();
    this.warming = false;
    this.plan();
    const loop = () => {
      if (this.stopped) return;
      this.plan(true);
      this.fleet.clock.after(this.fleet.gateway.config.fleet.reconcileIntervalMs, loop);
    };
    this.fleet.clock.after(this.fleet.gateway.config.fleet.reconcileIntervalMs, loop);
  }

  stop(): void {
    this.account();
    this.stopped = true;
  }

  /** GPU time and the time-averaged count start again from now (a bench's warm-up is over). */
  restartAccounting(): void {
    this.account();
    this.gpuMs = 0;
    this.provisionedMs = 0;
    this.accountFrom = this.fleet.clock.now;
  }

  /** The model's desired replica count from now on, as `llmgw ctl scale` or an autoscaler sets it. */
  scaleTo(replicas: number): void {
    if (replicas === this.spec.replicas) return;
    this.spec = { ...this.spec, replicas };
    this.plan();
  }

  /** Replicas placed and not leaving (starting or ready), and of those, serving. */
  counts(): { provisioned: number; ready: number } {
    let provisioned = 0;
    let ready = 0;
    const table = this.fleet.gateway.tables.table;
    for (const r of this.replicas.values()) {
      if (r.record.draining !== null) continue;
      provisioned++;
      if (r.phase === "Ready" && r.handedOff && table.getInt(r.slot, I.READY) === 1) ready++;
    }
    return { provisioned, ready };
  }

  /** The engine slots of the serving replicas (Ready, handed to the gateway, not leaving). */
  servingSlots(): number[] {
    return [...this.replicas.values()].filter((r) => r.phase === "Ready" && r.handedOff && r.record.draining === null).map((r) => r.slot);
  }

  /** How many more replicas placement could add now: whole groups of free GPUs on ready nodes not cordoned. */
  placeable(): number {
    let n = 0;
    for (const node of this.nodes) {
      if (node.cordoned || node.state !== "Ready") continue;
      n += Math.floor(node.gpus.filter((g) => g.usedBy === null && g.faults.length === 0).length / this.spec.tensorParallel);
    }
    return n;
  }

  /** The last start-up measured (launch to Ready), ms; undefined until a replica launched during the run became Ready. */
  measuredStartupMs(): number | undefined {
    return this.lastStartupMs;
  }

  /** A node drain, as `llmgw ctl drain`: its replicas leave once replacements serve elsewhere, or at the grace period. */
  drainNode(node: number, graceMs: number): DrainOp {
    const name = this.nodes[node]!.name;
    const running = this.drains.find((d) => d.node === name && d.state === "running");
    if (running) return running;
    this.nodes[node]!.cordoned = true;
    const op: DrainOp = { node: name, startedAt: this.fleet.clock.now, graceMs, state: "running", finishedAt: null };
    this.drains.push(op);
    this.plan();
    return op;
  }

  /** The node is back in service (its drain over and its cordon lifted). */
  uncordon(node: number): void {
    this.nodes[node]!.cordoned = false;
  }

  report(): TwinFleetReport {
    this.account();
    const now = this.fleet.clock.now;
    return {
      nodes: this.hw.count,
      gpus_per_node: this.hw.gpus,
      tensor_parallel: this.spec.tensorParallel,
      startup_s: (this.spec.startupMs ?? 0) / 1000,
      desired: this.spec.replicas,
      launched: this.launched,
      stopped: this.stoppedCount,
      gpu_hours: Math.round((this.gpuMs / 3_600_000) * 1000) / 1000,
      provisioned_mean: now > this.accountFrom ? Math.round((this.provisionedMs / (now - this.accountFrom)) * 1000) / 1000 : 0,
      serving: {
        mean: this.servingTicks > 0 ? Math.round((this.servingSum / this.servingTicks) * 1000) / 1000 : 0,
        min: Number.isFinite(this.servingMin) ? this.servingMin : 0,
        max: this.servingMax,
      },
      actions: this.actions,
      actions_total: this.actionCount,
    };
  }

  /** One reconcile: what the agents report, the planner's actions on it, performed. */
  private plan(sample = false): void {
    if (this.stopped) return;
    const { clock, gateway, engines } = this.fleet;
    const now = clock.now;
    this.account();
    // What the agents would report: Ready once started, Missing once the process is gone.
    for (const r of this.replicas.values()) {
      if (r.phase === "Starting" && now >= r.readyAt) {
        r.phase = "Ready";
        if (r.readyAt > r.launchedAt) this.lastStartupMs = r.readyAt - r.launchedAt;
      } else if (r.phase === "Ready" && r.handedOff && engines[r.slot]!.down) r.phase = "Missing";
    }
    const table = gateway.tables.table;
    const views: ReplicaView[] = [...this.replicas.values()].map((r) => ({
      record: r.record,
      phase: r.phase,
      busy: false,
      handedOff: r.handedOff,
      drainingSignalled: r.drainingSignalled,
      inflight: r.handedOff ? table.getInt(r.slot, I.INFLIGHT) : 0,
      gatewayReady: table.getInt(r.slot, I.READY) === 1,
      launchFailures: 0,
    }));
    // Sampled at the periodic reconciles only (not the first ones of the run, nor those a start-up's end brings).
    if (sample) {
      const serving = views.filter((v) => v.phase === "Ready" && v.handedOff && !v.drainingSignalled && v.gatewayReady).length;
      this.servingSum += serving;
      this.servingTicks++;
      this.servingMin = Math.min(this.servingMin, serving);
      this.servingMax = Math.max(this.servingMax, serving);
    }
    const actions = planReconcile({
      now,
      models: [this.spec],
      replicas: views,
      nodes: this.nodes,
      agents: this.nodes.map((n) => ({ node: n.name, state: n.state, fleetIds: [] })),
      drains: this.drains,
      backoffUntil: {},
      drainGraceMs: gateway.config.fleet.drainGraceMs,
      maxLaunchFailures: 3,
    });
    for (const a of actions) this.perform(a);
  }

  private perform(a: Action): void {
    const { clock, gateway, engines } = this.fleet;
    const now = clock.now;
    const r = "replica" in a ? this.replicas.get(a.replica) : undefined;
    this.note(a);
    switch (a.kind) {
      case "create": {
        const slot = this.freeSlots.pop();
        if (slot === undefined) return; // the fleet's slots are sized to its GPUs: not reached
        const id = `fl-twin-${this.nextId++}`;
        for (const sh of a.shards) for (const g of sh.gpus) this.gpu(sh.node, g).usedBy = id;
        const record = buildReplicaRecord(this.spec, a.shards, id, now, (node) => `${node}.twin.invalid`);
        const readyAt = now + (this.warming ? 0 : (this.spec.startupMs ?? 0));
        this.replicas.set(id, { record, phase: "Starting", readyAt, launchedAt: now, slot, handedOff: false, drainingSignalled: false });
        this.launched++;
        if (!this.warming) this.wakeAt(readyAt);
        return;
      }
      case "launch":
        if (!r) return;
        r.phase = "Starting";
        r.launchedAt = now;
        r.readyAt = now + (this.spec.startupMs ?? 0);
        this.wakeAt(r.readyAt);
        return;
      case "add-endpoint":
        if (!r) return;
        engines[r.slot]!.restart();
        r.handedOff = true;
        r.drainingSignalled = a.draining;
        gateway.setDraining(r.slot, a.draining);
        return;
      case "remove-endpoint":
        if (!r) return;
        r.handedOff = false;
        gateway.evictions.evict(r.slot);
        engines[r.slot]!.kill();
        return;
      case "signal-draining":
        if (!r) return;
        r.drainingSignalled = a.draining;
        gateway.setDraining(r.slot, a.draining);
        return;
      case "mark-draining":
        if (!r) return;
        r.record = { ...r.record, draining: { since: now, reason: a.reason, graceMs: a.graceMs } };
        return;
      case "stop":
      case "fail":
      case "forget":
        if (!r) return;
        this.release(r);
        return;
      case "finish-drain": {
        const d = this.drains.find((x) => x.node === a.node && x.state === "running");
        if (d) {
          d.state = "done";
          d.finishedAt = now;
        }
        return;
      }
      case "delete-orphan":
      case "replacement-unplaced":
        return;
    }
  }

  /** A replica is gone: its open streams move elsewhere, its engine stops, its GPUs and slot are free. */
  private release(r: TwinReplica): void {
    const { gateway, engines } = this.fleet;
    if (r.handedOff) gateway.evictions.evict(r.slot);
    engines[r.slot]!.kill();
    gateway.setDraining(r.slot, false);
    for (const s of r.record.shards) for (const g of s.gpus) this.gpu(s.node, g).usedBy = null;
    this.replicas.delete(r.record.id);
    this.freeSlots.push(r.slot);
    this.stoppedCount++;
  }

  private gpu(node: string, index: number) {
    return this.nodes.find((n) => n.name === node)!.gpus.find((g) => g.index === index)!;
  }

  /** A reconcile when a start-up ends, so that a replica is handed over when it is Ready rather than at the next interval. */
  private wakeAt(at: number): void {
    this.fleet.clock.at(at, () => this.plan());
  }

  /** GPU time since the last look: each replica holds its GPUs from launch to stop. */
  private account(): void {
    const now = this.fleet.clock.now;
    let gpus = 0;
    let provisioned = 0;
    for (const r of this.replicas.values()) {
      for (const s of r.record.shards) gpus += s.gpus.length;
      if (r.record.draining === null) provisioned++;
    }
    this.gpuMs += gpus * (now - this.lastAccountAt);
    this.provisionedMs += provisioned * (now - this.lastAccountAt);
    this.lastAccountAt = now;
  }

  private note(a: Action): void {
    this.actionCount++;
    if (this.actions.length >= MAX_REPORTED_ACTIONS) return;
    this.actions.push({
      at_ms: this.fleet.clock.now,
      kind: a.kind,
      ...("replica" in a ? { replica: a.replica } : {}),
      ...("node" in a ? { node: a.node } : a.kind === "create" ? { node: a.shards.map((sh) => sh.node).join(",") } : {}),
      ...("reason" in a && typeof a.reason === "string" ? { reason: a.reason } : {}),
    });
  }
}
