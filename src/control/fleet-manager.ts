/**
 * The fleet manager: the shell around the pure planner. It keeps the node
 * registry, desired models, cordons, drains and replica records (written
 * through to the store), turns agent polls into replica phases, plans
 * (reconcile.ts) and performs the actions: agent calls run in the
 * background, each under its own deadline, so one slow or broken agent never
 * holds up the others; their errors land on the node and the replica.
 *
 * After a restart nothing is planned until every known node has answered
 * once or turned NotReady: until then the records say what runs, and
 * replicas that still run are adopted, never launched twice.
 *
 * With several gateways on one store only the lease holder acts
 * on agents and writes replica records; the others follow: they re-read the
 * store, hand Ready replicas to their own gateway and take them back, and
 * serve the management API (its writes go to the store, where the leader
 * finds them). A gateway that becomes the leader re-reads everything first.
 */
import type { Config } from "../config/types.ts";
import type { AgentSnapshot } from "../protocol/agent-messages.ts";
import type { AgentPollSettings, PolledAgent } from "../protocol/health-messages.ts";
import { type Logger, logger } from "../shared/logger.ts";
import { AdapterActions, type AdapterDemand } from "./adapter-actions.ts";
import { type AgentClient, httpAgentClient } from "./agent-client.ts";
import type { DemandSignals, PeerDemand } from "./autoscale/demand.ts";
import { type AutoscaledFleet, FleetAutoscaler } from "./autoscale/fleet-autoscaler.ts";
import { configModelChanges } from "./desired-state.ts";
import type { EndpointSink } from "./endpoint-sink.ts";
import { FleetActions } from "./fleet-actions.ts";
import { FleetOperations } from "./fleet-operations.ts";
import { FleetState, type ReplicaEntry } from "./fleet-state.ts";
import { applySnapshot, readSnapshot } from "./fleet-sync.ts";
import { NodeRegistry } from "./node-registry.ts";
import { type NodeInput, observeNodes, placementNodes } from "./placement-inputs.ts";
import type { PlacementResult } from "./placement-types.ts";
import { isActive, isServing, placeModel, planReconcile, type ReconcileView, type ReplicaView, withModelCounts } from "./reconcile.ts";
import { isFleetAgentId } from "./replica-builder.ts";
import { derivePhase } from "./replica-phase.ts";
import type { FleetStore } from "./store.ts";

/** Relaunches of a missing shard that fail before the replica is given up on. */
const MAX_LAUNCH_FAILURES = 3;
/** How long stop() waits for agent calls in flight. */
const STOP_WAIT_MS = 5_000;

/** What a follower does of a plan: its own gateway's table; never agents or replica records. */
const FOLLOWER_ACTIONS: ReadonlySet<string> = new Set(["add-endpoint", "remove-endpoint", "signal-draining"]);

/**
 * Several gateways: whether this one holds the reconciler lease
 * now, and the lease's fencing token for agent calls.
 */
export interface FleetLeadership {
  isLeader(): boolean;
  fencingToken(): number | undefined;
  /** An agent has seen a newer leader's token: this gateway lost the lease, whatever it believed. */
  fenced(): void;
  /** How often to re-read the shared store. */
  refreshEveryMs: number;
}

interface FleetManagerOptions {
  config: Pick<Config, "nodes" | "fleet">;
  store: FleetStore;
  sink: EndpointSink;
  /** Tells whoever polls agents (the health worker, or an in-process AgentPoller) which agents to poll. */
  pollAgents: (agents: PolledAgent[], settings: AgentPollSettings) => void;
  agentClient?: AgentClient;
  /** Absent: one gateway, always the leader, the store is its own. */
  leadership?: FleetLeadership;
  now?: () => number;
  random?: () => number;
  log?: Logger;
  /** What the gateway sees of requests for LoRA adapters; absent: adapters are never loaded. */
  adapterDemand?: AdapterDemand;
  /** The adapters the desired models declare, with their base, whenever that list changes (the gateway resolves their names). */
  onDeclaredAdapters?: (adapters: { name: string; base: string }[]) => void;
  /** Where a model's api_key_env is looked up (process.env when absent). */
  env?: Readonly<Record<string, string | undefined>>;
  /** What the gateway sees of autoscaled models' requests; absent: no model is autoscaled. */
  demand?: DemandSignals;
  /** Several gateways: where followers publish their demand and the leader collects it. */
  peerDemand?: PeerDemand;
}

export class FleetManager {
  readonly state: FleetState;
  /** Operator changes (management API). */
  readonly ops: FleetOperations;
  private readonly actions: FleetActions;
  /** The fleet's LoRA adapters: loaded where requests for them arrive, unloaded when idle. */
  readonly adapters: AdapterActions;
  private readonly log: Logger;
  private readonly now: () => number;
  private timer: ReturnType<typeof setInterval> | undefined;
  private ticking: Promise<void> | undefined;
  private again = false;
  private settled = false;
  private stopped = false;
  private refreshTimer: ReturnType<typeof setInterval> | undefined;
  /** Leader at the last tick (a change to leader re-reads the store first). */
  private leading: boolean;
  /** The declared adapters last told to onDeclaredAdapters. */
  private declaredKey: string | undefined;
  /** Sets the count of models with `autoscaling` (absent without a demand source). */
  readonly autoscaler: FleetAutoscaler | undefined;

  private constructor(
    private readonly opts: FleetManagerOptions,
    state: FleetState,
  ) {
    this.state = state;
    this.log = opts.log ?? logger();
    this.now = opts.now ?? Date.now;
    this.leading = opts.leadership === undefined;
    const lead = opts.leadership;
    const client = opts.agentClient ?? httpAgentClient(opts.config.fleet.agentCallTimeoutMs, undefined, () => lead?.fencingToken());
    this.actions = new FleetActions(state, opts.store, opts.sink, client, {
      log: this.log,
      now: this.now,
      random: opts.random ?? Math.random,
      fleet: opts.config.fleet,
      onSettled: () => this.requestTick(),
      onFenced: () => lead?.fenced(),
    });
    this.adapters = new AdapterActions(opts.sink, client, opts.adapterDemand, {
      log: this.log,
      now: this.now,
      idleUnloadMs: opts.config.fleet.adapterIdleUnloadMs,
      agentOf: (entry) => {
        const shard = entry.record.shards[0];
        const node = shard ? state.registry.get(shard.node) : undefined;
        return shard && node ? { address: { url: node.url, token: node.token }, agentId: shard.agentId } : undefined;
      },
      onSettled: () => this.requestTick(),
    });
    this.ops = new FleetOperations(state, opts.store, {
      now: this.now,
      log: this.log,
      fleet: opts.config.fleet,
      requestTick: () => this.requestTick(),
      pushPollTargets: () => this.pushPollTargets(),
      env: opts.env ?? process.env,
    });
    if (opts.demand)
      this.autoscaler = new FleetAutoscaler(this.autoscaledFleet(), opts.demand, {
        now: this.now,
        log: this.log,
        ...(opts.peerDemand ? { peers: opts.peerDemand } : {}),
      });
  }

  /** The autoscaler's view of this fleet, and its one way to change it (the count, as an operator's scale would). */
  private autoscaledFleet(): AutoscaledFleet {
    return {
      models: () => [...this.state.models.values()].map((m) => ({ spec: m.spec, pinned: m.pinnedAt !== undefined })),
      replicas: (model) => {
        const out: { id: string; createdAt: number; serving: boolean }[] = [];
        for (const e of this.state.replicas.values()) {
          if (e.record.model !== model) continue;
          const v = this.replicaView(e);
          if (isActive(v)) out.push({ id: e.record.id, createdAt: e.record.createdAt, serving: isServing(v) });
        }
        return out;
      },
      load: (id) => safe(() => this.opts.sink.load?.(id), undefined),
      placeable: (model, upTo) => {
        const spec = this.state.models.get(model)?.spec;
        if (!spec || upTo <= 0) return 0;
        const { nodes, replicas } = this.view(this.now());
        return placeModel(spec, upTo, withModelCounts(nodes, replicas)).placements.length;
      },
      isLeader: () => this.isLeader(),
      setReplicas: (model, replicas) => this.ops.autoscale(model, replicas),
    };
  }

  /** Load the store, apply the config's desired models, and build the manager (not started). */
  static async open(opts: FleetManagerOptions): Promise<FleetManager> {
    const now = (opts.now ?? Date.now)();
    const log = opts.log ?? logger();
    const store = opts.store;
    for (const change of configModelChanges(opts.config.fleet.models, await store.models.list(), now)) {
      if (change.kind === "put") await store.models.put(change.model.spec.name, change.model);
      else await store.models.delete(change.name);
      log.info({ model: change.kind === "put" ? change.model.spec.name : change.name, change: change.kind, why: change.note }, "fleet desired model");
    }
    const registry = new NodeRegistry(opts.config.nodes, await store.nodes.list(), now);
    const state = new FleetState(registry, now);
    for (const m of await store.models.list()) state.models.set(m.spec.name, m);
    for (const c of await store.cordons.list()) state.cordons.set(c.node, c);
    for (const d of await store.drains.list()) state.drains.set(d.node, d);
    for (const r of await store.replicas.list()) state.adoptRecord(r, now);
    if (state.replicas.size > 0) log.info({ replicas: [...state.replicas.keys()] }, "fleet: replica records loaded; adopting what still runs");
    return new FleetManager(opts, state);
  }

  /** Tell the gateway the declared adapters when they changed (the desired models change through config, API or store). */
  private announceAdapters(): void {
    const list = [...this.state.models.values()].flatMap((m) => m.spec.adapters.map((a) => ({ name: a.name, base: m.spec.name })));
    const key = list.map((a) => `${a.name}\u0000${a.base}`).join("\n");
    if (key === this.declaredKey) return;
    this.declaredKey = key;
    this.opts.onDeclaredAdapters?.(list);
  }

  start(): void {
    this.announceAdapters();
    this.pushPollTargets();
    this.timer ??= setInterval(() => this.requestTick(), this.opts.config.fleet.reconcileIntervalMs);
    this.autoscaler?.start();
    const lead = this.opts.leadership;
    if (lead) this.refreshTimer ??= setInterval(() => void this.refresh(), lead.refreshEveryMs);
    this.requestTick();
  }

  /** When a request last named an adapter at this gateway (undefined: never, or no demand source). */
  adapterLastRequestAt(adapter: string): number | undefined {
    return this.opts.adapterDemand?.lastRequestAt(adapter);
  }

  /** Replicas of the model in the gateway's rotation and answering (not leaving). */
  servingCount(model: string): number {
    let n = 0;
    for (const e of this.state.replicas.values()) {
      if (e.record.model !== model || e.record.draining !== null) continue;
      if (isServing(this.replicaView(e))) n++;
    }
    return n;
  }

  /** Whether this gateway reconciles (one gateway: always). */
  isLeader(): boolean {
    return this.opts.leadership?.isLeader() ?? true;
  }

  /**
   * Re-read the shared store (several gateways): everything for a follower,
   * what operators change for the leader. A store that cannot be read keeps
   * the last state (fail static) and is tried again at the next refresh.
   */
  async refresh(replicas = !this.isLeader()): Promise<boolean> {
    if (this.stopped) return false;
    try {
      const snap = await readSnapshot(this.opts.store);
      const applied = applySnapshot(this.state, snap, { replicas, now: this.now() });
      for (const e of applied.removed) if (e.runtime.handedOff) safe(() => this.opts.sink.removeEndpoint(e.record.id), undefined);
      for (const r of applied.rewritten) await this.opts.store.replicas.put(r.id, r);
      if (applied.pollTargetsChanged) this.pushPollTargets();
      this.requestTick();
      return true;
    } catch (err) {
      this.log.warn({ err: err instanceof Error ? err.message : String(err) }, "fleet: cannot read the shared store; keeping the last state");
      return false;
    }
  }

  /** Stop planning; wait (bounded) for agent calls in flight. Nothing running is stopped. */
  async stop(): Promise<void> {
    // Before anything else: an agent call settling or a poll arriving from now on must not plan again.
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    if (this.refreshTimer) clearInterval(this.refreshTimer);
    this.timer = undefined;
    this.refreshTimer = undefined;
    await this.autoscaler?.stop();
    await this.ticking;
    await Promise.all([this.actions.settle(STOP_WAIT_MS), this.adapters.settle(STOP_WAIT_MS)]);
  }

  /** A poll of one agent (from the health worker, or an in-process poller). */
  onAgentSnapshot(node: string, snapshot: AgentSnapshot): void {
    this.state.registry.update(node, snapshot);
    this.requestTick();
  }

  pushPollTargets(): void {
    const f = this.opts.config.fleet;
    this.opts.pollAgents(this.state.registry.targets(), { intervalMs: f.agentPollIntervalMs, timeoutMs: f.agentPollTimeoutMs });
  }

  /** Where `missing` more replicas of a model would go (at least one), with every candidate's verdict. */
  explain(model: string): (PlacementResult & { requested: number }) | undefined {
    const spec = this.state.models.get(model)?.spec;
    if (!spec) return undefined;
    const { nodes, replicas } = this.view(this.now());
    const active = replicas.filter((r) => r.record.model === model && isActive(r)).length;
    const requested = Math.max(1, spec.replicas - active);
    return { ...placeModel(spec, requested, withModelCounts(nodes, replicas)), requested };
  }

  /** Every node known at start has answered once or turned NotReady: planning has begun. */
  isSettled(): boolean {
    return this.settled;
  }

  requestTick(): void {
    if (this.stopped) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    this.ticking = this.tick().finally(() => {
      this.ticking = undefined;
      if (this.again) {
        this.again = false;
        this.requestTick();
      }
    });
  }

  private nodeInputs(now: number): NodeInput[] {
    const notReadyAfter = this.opts.config.fleet.nodeNotReadyAfterMs;
    return this.state.registry.list().map((e) => ({
      name: e.name,
      state: this.state.registry.state(e.name, now, notReadyAfter)!,
      cordoned: this.state.cordons.has(e.name),
      snapshot: e.snapshot,
    }));
  }

  /** Phases refreshed from the latest polls, and the planner's input. */
  view(now: number): ReconcileView {
    const inputs = this.nodeInputs(now);
    const observed = observeNodes(inputs);
    const views: ReplicaView[] = [];
    for (const entry of this.state.replicas.values()) {
      entry.verdict = derivePhase(entry.record, observed, entry.runtime, now, this.opts.config.fleet.replicaReadyTimeoutMs);
      views.push(this.replicaView(entry));
    }
    return {
      now,
      models: [...this.state.models.values()].map((m) => m.spec),
      replicas: views,
      nodes: placementNodes(
        inputs,
        [...this.state.replicas.values()].map((e) => e.record),
      ),
      agents: inputs.map((n) => ({
        node: n.name,
        state: n.state,
        fleetIds: (n.snapshot?.state?.replicas ?? [])
          .map((r) => r.id)
          .filter((id) => isFleetAgentId(id) && !this.actions.deletedOrDeleting(n.name, id, n.snapshot?.stateRequestedAt)),
      })),
      drains: [...this.state.drains.values()].filter((d) => d.state === "running"),
      backoffUntil: Object.fromEntries([...this.state.backoff].map(([m, b]) => [m, b.until])),
      drainGraceMs: this.opts.config.fleet.drainGraceMs,
      maxLaunchFailures: MAX_LAUNCH_FAILURES,
    };
  }

  private replicaView(e: ReplicaEntry): ReplicaView {
    const sink = this.opts.sink;
    const handedOff = e.runtime.handedOff;
    return {
      record: e.record,
      phase: e.verdict.phase,
      busy: e.runtime.busy,
      handedOff,
      drainingSignalled: e.runtime.drainingSignalled,
      inflight: handedOff ? safe(() => sink.inflight(e.record.id), 0) : 0,
      gatewayReady: handedOff ? safe(() => sink.ready?.(e.record.id) ?? true, false) : false,
      launchFailures: e.runtime.launchFailures,
    };
  }

  private settledNow(now: number): boolean {
    if (this.settled) return true;
    const notReadyAfter = this.opts.config.fleet.nodeNotReadyAfterMs;
    const waiting = this.state.registry.list().filter((e) => this.state.registry.state(e.name, now, notReadyAfter) === "Unknown");
    if (waiting.length > 0) return false;
    this.settled = true;
    this.log.info("fleet: every node answered or is NotReady; reconciling");
    return true;
  }

  private async tick(): Promise<void> {
    try {
      const leader = this.isLeader();
      if (leader && !this.leading) {
        // Just elected: what the last leader placed and what operators changed are in the store, not in memory.
        if (!(await this.refresh(true))) return;
        this.log.info({ replicas: this.state.replicas.size }, "fleet: this gateway holds the reconciler lease now");
      } else if (!leader && this.leading) {
        this.log.warn("fleet: this gateway no longer holds the reconciler lease; following");
      }
      this.leading = leader;
      this.announceAdapters();
      const now = this.now();
      const view = this.view(now);
      if (!this.settledNow(now)) return;
      for (const action of planReconcile(view)) {
        if (leader && !this.isLeader()) return; // the lease lapsed mid-plan: stop acting at once
        if (leader || FOLLOWER_ACTIONS.has(action.kind)) await this.actions.perform(action, now);
      }
      if (leader && this.isLeader()) this.adapters.reconcile(view.models, this.state.replicas, now);
    } catch (err) {
      this.log.error({ err }, "fleet reconcile failed");
    }
  }
}

/** A sink that throws must not stop reconciliation: its answer is taken as `fallback`. */
function safe<T>(fn: () => T, fallback: T): T {
  try {
    return fn();
  } catch (err) {
    logger().error({ err }, "endpoint sink call failed");
    return fallback;
  }
}
