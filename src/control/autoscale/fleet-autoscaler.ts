/**
 * The fleet's autoscaling controller: one Autoscaler per model with
 * `autoscaling`, each deciding every `interval_ms` on a sample of what the
 * gateway saw of the model's requests (demand.ts) and what its replicas'
 * engines last reported, and setting the model's desired replica count
 * through the fleet's operations — so a scale-up is a placement and a
 * scale-down the existing drain. Only the leader decides; with several
 * gateways, followers publish their windows and the leader adds them to its
 * own (PeerDemand). A model an operator pinned with `ctl scale` is sampled and
 * decided on, but not changed, until the pin is released. Start-ups are
 * measured from the replicas it sees start, creation to serving, at the
 * resolution of its interval (a replica that started and served between two
 * looks counts up to the second look).
 */
import type { FleetAutoscalingSpec, FleetModelSpec } from "../../config/types.ts";
import type { AutoscaleReason } from "../../metrics/names.ts";
import { scaleAuditRecord } from "../../shared/audit.ts";
import { infoRecord, type Logger } from "../../shared/logger.ts";
import { type AutoscaleDecision, Autoscaler } from "./autoscaler.ts";
import { type DemandSignals, type DemandWindow, mergeWindows, type PeerDemand, type PeerWindow } from "./demand.ts";
import {
  type AutoscalePolicy,
  DEFAULT_AUTOSCALE_INTERVAL_MS,
  DEFAULT_MAX_SURGE,
  DEFAULT_SCALE_DOWN_EVERY_MS,
  DEFAULT_SCALE_DOWN_WINDOW_MS,
  DEFAULT_SCALE_UP_WINDOW_MS,
  DEFAULT_STARTUP_MS,
  DEFAULT_TARGET_UTILIZATION,
} from "./policy.ts";
import type { ReplicaLoad } from "./signals.ts";

/** The SLO percentile when the config names none. */
const DEFAULT_SLO_PERCENTILE = 90;
/** The controller looks for due models at least this often, ms. */
const MAX_TICK_MS = 1_000;
/** A follower's window older than this many of the model's intervals does not count. */
const PEER_WINDOW_MAX_INTERVALS = 3;
/** Followers' windows kept per model between two of its decisions, at most (the latest). */
const MAX_PENDING_PEER_WINDOWS = 1_000;

/** A model's autoscaling with every default filled in. */
export function autoscalePolicy(a: FleetAutoscalingSpec): AutoscalePolicy {
  return {
    minReplicas: a.minReplicas,
    maxReplicas: a.maxReplicas,
    slo: { ttftMs: a.slo.ttftMs, itlMs: a.slo.itlMs, percentile: a.slo.percentile ?? DEFAULT_SLO_PERCENTILE },
    law: a.law ?? "capacity",
    intervalMs: a.intervalMs ?? DEFAULT_AUTOSCALE_INTERVAL_MS,
    scaleUpWindowMs: a.scaleUpWindowMs ?? DEFAULT_SCALE_UP_WINDOW_MS,
    scaleDownWindowMs: a.scaleDownWindowMs ?? DEFAULT_SCALE_DOWN_WINDOW_MS,
    maxSurge: a.maxSurge ?? DEFAULT_MAX_SURGE,
    scaleDownEveryMs: a.scaleDownEveryMs ?? DEFAULT_SCALE_DOWN_EVERY_MS,
    targetUtilization: a.targetUtilization ?? DEFAULT_TARGET_UTILIZATION,
    startupMs: a.assumedStartupMs ?? DEFAULT_STARTUP_MS,
    ...(a.promptTokensPerReplicaS !== undefined ? { promptTokensPerReplicaS: a.promptTokensPerReplicaS } : {}),
  };
}

/** Every reason a decision gives is one the metric declares (checked by the compiler). */
const reasonLabel = (r: AutoscaleDecision["reason"]): AutoscaleReason => r;

/** What the controller reads of the fleet and asks of it (the fleet manager). */
export interface AutoscaledFleet {
  /** Desired models, each with whether an operator pinned its count. */
  models(): readonly { spec: FleetModelSpec; pinned: boolean }[];
  /** The model's replicas placed and not leaving, each with whether it serves. */
  replicas(model: string): readonly { id: string; createdAt: number; serving: boolean }[];
  /** A serving replica's load as its engine last reported it (undefined: not polled yet). */
  load(id: string): ReplicaLoad | undefined;
  /** How many more replicas of the model placement could add now, up to `upTo`. */
  placeable(model: string, upTo: number): number;
  isLeader(): boolean;
  /** Set the model's desired count (not when pinned: the caller checks). */
  setReplicas(model: string, replicas: number): Promise<void>;
}

/** One autoscaled model as `ctl autoscale` and the metrics show it. */
interface ModelAutoscaleStatus {
  model: string;
  policy: AutoscalePolicy;
  pinned: boolean;
  /** Replicas placed and not leaving, and of those serving, at the last decision. */
  current: number;
  ready: number;
  /** The desired count the fleet holds now. */
  desired: number;
  /** The last start-up measured (creation to serving), ms; null until one was. */
  measuredStartupMs: number | null;
  /** Decisions taken, oldest first (the last ones). */
  decisions: readonly AutoscaleDecision[];
  /** Decisions by reason since this gateway started deciding. */
  reasons: ReadonlyMap<AutoscaleReason, number>;
}

interface ModelState {
  key: string;
  autoscaler: Autoscaler;
  lastAt: number;
  /** Replicas seen before they served: id → creation time. */
  starting: Map<string, number>;
  /** The model's replicas at the last look, and its time: a replica serving now that is not among them and was created since started and served within one interval. */
  known: Set<string>;
  lookedAt: number;
  measuredStartupMs: number | undefined;
  current: number;
  ready: number;
  reasons: Map<AutoscaleReason, number>;
}

export class FleetAutoscaler {
  private readonly byModel = new Map<string, ModelState>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  /** Models whose cold-start decision is being applied. */
  private readonly coldStarting = new Set<string>();
  /** Followers' windows collected since each model's last decision, with when they were collected. */
  private readonly pending = new Map<string, { w: PeerWindow; collectedAt: number }[]>();

  constructor(
    private readonly fleet: AutoscaledFleet,
    private readonly demand: DemandSignals,
    private readonly opts: { now: () => number; log: Logger; peers?: PeerDemand },
  ) {}

  start(): void {
    this.watch();
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** The autoscaled models now. */
  status(): ModelAutoscaleStatus[] {
    const out: ModelAutoscaleStatus[] = [];
    for (const { spec, pinned } of this.fleet.models()) {
      if (!spec.autoscaling) continue;
      const st = this.byModel.get(spec.name);
      out.push({
        model: spec.name,
        policy: autoscalePolicy(spec.autoscaling),
        pinned,
        current: st?.current ?? 0,
        ready: st?.ready ?? 0,
        desired: spec.replicas,
        measuredStartupMs: st?.measuredStartupMs ?? null,
        decisions: st?.autoscaler.decisions() ?? [],
        reasons: st?.reasons ?? new Map(),
      });
    }
    return out;
  }

  /**
   * A request reached a model at zero replicas that scales from zero: the
   * leader decides at once rather than at the next interval (the request is
   * in the window, so the decision is a cold start). A follower does
   * nothing: the leader decides from what it sees.
   */
  async coldStart(model: string): Promise<void> {
    const m = this.fleet.models().find((x) => x.spec.name === model);
    if (!m?.spec.autoscaling || m.pinned || m.spec.replicas > 0 || !this.fleet.isLeader()) return;
    const st = this.byModel.get(model);
    if (!st || this.coldStarting.has(model)) return;
    const policy = autoscalePolicy(m.spec.autoscaling);
    const now = this.opts.now();
    st.lastAt = now;
    this.coldStarting.add(model);
    try {
      await this.decide(m.spec, policy, m.pinned, st, this.withPeers(model, this.demand.take(model), policy, now), now);
    } finally {
      this.coldStarting.delete(model);
    }
  }

  /** The request path counts toward each autoscaled model under its name and its adapters' names. */
  private watch(): void {
    this.demand.watch(
      this.fleet
        .models()
        .filter((m) => m.spec.autoscaling !== undefined)
        .map((m) => ({ model: m.spec.name, aliases: m.spec.adapters.map((a) => a.name) })),
    );
  }

  private schedule(): void {
    if (this.stopped) return;
    let every = MAX_TICK_MS;
    for (const { spec } of this.fleet.models()) if (spec.autoscaling) every = Math.min(every, autoscalePolicy(spec.autoscaling).intervalMs);
    this.timer = setTimeout(() => {
      this.running = this.tick()
        .catch((err) => this.opts.log.error({ err }, "autoscaler: decision failed"))
        .finally(() => {
          this.running = undefined;
          this.schedule();
        });
    }, every);
  }

  /** Decide for every model whose interval has passed. */
  async tick(): Promise<void> {
    this.watch();
    if (this.opts.peers && this.fleet.isLeader() && this.fleet.models().some((m) => m.spec.autoscaling)) this.buffer(await this.opts.peers.collect());
    const now = this.opts.now();
    const seen = new Set<string>();
    for (const { spec, pinned } of this.fleet.models()) {
      if (!spec.autoscaling || this.stopped) continue;
      seen.add(spec.name);
      const policy = autoscalePolicy(spec.autoscaling);
      const key = JSON.stringify(policy);
      let st = this.byModel.get(spec.name);
      if (!st || st.key !== key) {
        // A new or changed policy starts a fresh history; what was measured of the replicas stands.
        st = {
          key,
          autoscaler: new Autoscaler(policy),
          lastAt: now,
          starting: st?.starting ?? new Map(),
          known: st?.known ?? new Set(),
          lookedAt: st?.lookedAt ?? now,
          measuredStartupMs: st?.measuredStartupMs,
          current: st?.current ?? 0,
          ready: st?.ready ?? 0,
          reasons: st?.reasons ?? new Map(),
        };
        this.byModel.set(spec.name, st);
        this.demand.take(spec.name); // the window opens now
        continue;
      }
      if (now - st.lastAt < policy.intervalMs) continue;
      st.lastAt = now;
      const window = this.demand.take(spec.name);
      // Only the leader decides; a follower hands its window to the leader (or, alone, drops it).
      if (!this.fleet.isLeader()) {
        this.opts.peers?.publish(spec.name, window);
        continue;
      }
      await this.decide(spec, policy, pinned, st, this.withPeers(spec.name, window, policy, now), now);
    }
    for (const model of this.byModel.keys()) if (!seen.has(model)) this.byModel.delete(model);
    for (const model of this.pending.keys()) if (!seen.has(model)) this.pending.delete(model);
  }

  /** Keep the followers' windows for each model's next decision. */
  private buffer(windows: readonly PeerWindow[]): void {
    const collectedAt = this.opts.now();
    for (const w of windows) {
      let list = this.pending.get(w.model);
      if (!list) this.pending.set(w.model, (list = []));
      list.push({ w, collectedAt });
      if (list.length > MAX_PENDING_PEER_WINDOWS) list.shift();
    }
  }

  /** The leader's window with its followers' added (those fresh enough), which are then used up. */
  private withPeers(model: string, own: DemandWindow, policy: AutoscalePolicy, now: number): DemandWindow {
    const list = this.pending.get(model);
    if (!list || list.length === 0) return own;
    this.pending.delete(model);
    const aged = list.map(({ w, collectedAt }) => ({ ...w, ageMs: w.ageMs + (now - collectedAt) }));
    return mergeWindows(own, aged, PEER_WINDOW_MAX_INTERVALS * policy.intervalMs);
  }

  private async decide(spec: FleetModelSpec, policy: AutoscalePolicy, pinned: boolean, st: ModelState, window: DemandWindow, now: number): Promise<void> {
    const replicas = this.fleet.replicas(spec.name);
    const loads: ReplicaLoad[] = [];
    const present = new Set<string>();
    for (const r of replicas) {
      present.add(r.id);
      if (!r.serving) {
        if (!st.starting.has(r.id)) st.starting.set(r.id, r.createdAt);
        continue;
      }
      // Serving now: measured if it was seen starting, or was created since the last look (it started and served within one interval).
      const createdAt = st.starting.get(r.id) ?? (!st.known.has(r.id) && r.createdAt > st.lookedAt ? r.createdAt : undefined);
      if (createdAt !== undefined) {
        st.measuredStartupMs = Math.max(0, now - createdAt);
        st.starting.delete(r.id);
      }
      const load = this.fleet.load(r.id);
      if (load) loads.push(load);
    }
    for (const id of st.starting.keys()) if (!present.has(id)) st.starting.delete(id);
    st.known = present;
    st.lookedAt = now;
    st.current = replicas.length;
    st.ready = replicas.filter((r) => r.serving).length;
    const d = st.autoscaler.decide({
      at: now,
      arrivals: window.arrivals,
      promptTokens: window.promptTokens,
      inflight: window.inflight,
      ttftMs: window.ttftMs,
      itlMs: window.itlMs,
      replicas: loads,
      provisioned: st.current,
      ready: st.ready,
      placeable: this.fleet.placeable(spec.name, Math.max(0, policy.maxReplicas - st.current)),
      ...(st.measuredStartupMs !== undefined ? { startupMs: st.measuredStartupMs } : {}),
    });
    const reason = reasonLabel(d.reason);
    st.reasons.set(reason, (st.reasons.get(reason) ?? 0) + 1);
    if (pinned || d.desired === spec.replicas) return;
    this.opts.log.info(
      { model: spec.name, from: spec.replicas, to: d.desired, current: d.current, asked: d.asked, reason: d.reason, figures: d.figures },
      "autoscaler: desired replicas changed",
    );
    await this.fleet.setReplicas(spec.name, d.desired);
    infoRecord(this.opts.log, scaleAuditRecord({ model: spec.name, from: spec.replicas, to: d.desired, reason: d.reason, atMs: now }), "audit");
  }
}
