/** Read views of the fleet for the management API and `llmgw ctl`: nodes with GPUs and faults, replicas with shards, models desired vs serving, drain progress. */
import { fleetModelWire } from "../config/fleet-schema.ts";
import type { AutoscaleStatus, DrainProgress, FailedReplicaStatus, ModelStatus, NodeStatus, PlacementStatus, ReplicaStatus } from "./fleet-api-schemas.ts";
import type { FleetManager } from "./fleet-manager.ts";
import { isActive, isServing, leaveState, type ReconcileView, type ReplicaView } from "./reconcile.ts";
import { replicaIdOf } from "./replica-builder.ts";
import type { DrainOp } from "./types.ts";

export function nodesStatus(manager: FleetManager, now: number): NodeStatus[] {
  const { state } = manager;
  const view = manager.view(now);
  return state.registry.list().map((e) => {
    const placement = view.nodes.find((n) => n.name === e.name);
    const snap = e.snapshot;
    const agentGpus = snap?.state?.gpus ?? [];
    const cordon = state.cordons.get(e.name);
    const drain = state.drains.get(e.name);
    const callError = state.nodeErrors.get(e.name);
    // The newer of the poll error and the last call error.
    const lastError = snap?.ok === false && snap.lastError ? snap.lastError : (callError?.message ?? null);
    return {
      name: e.name,
      url: e.url,
      source: e.source,
      state: placement?.state ?? "Unknown",
      cordoned: cordon !== undefined,
      cordon_reason: cordon?.reason ?? null,
      drain: drain ? { state: drain.state, started_at: drain.startedAt, grace_ms: drain.graceMs, finished_at: drain.finishedAt } : null,
      last_answer_age_ms: snap?.answeredAt === undefined ? null : Math.max(0, now - snap.answeredAt),
      last_error: lastError,
      agent_hostname: snap?.state?.node ?? null,
      fabric: snap?.state ? snap.state.fabric.island : null,
      gpus: (placement?.gpus ?? []).map((g) => {
        const a = agentGpus.find((x) => x.index === g.index);
        return {
          node: e.name,
          index: g.index,
          uuid: g.uuid,
          name: a?.name ?? "",
          class: g.class,
          memory_gib: g.memoryGiB,
          memory_used_mib: a?.memoryUsedMiB ?? null,
          utilization_pct: a?.utilizationPct ?? null,
          compute_capability: g.computeCapability,
          healthy: g.faults.length === 0,
          faults: g.faults,
          used_by: g.usedBy,
        };
      }),
      replicas: [...new Set((snap?.state?.replicas ?? []).map((r) => replicaIdOf(r.id)))].sort(),
    };
  });
}

function replicaStatus(manager: FleetManager, v: ReplicaView): ReplicaStatus {
  const entry = manager.state.replicas.get(v.record.id)!;
  return {
    id: v.record.id,
    model: v.record.model,
    pool: v.record.pool,
    engine: v.record.engine,
    phase: v.phase,
    detail: entry.verdict.detail,
    in_rotation: v.handedOff && !v.drainingSignalled,
    leaving: v.record.draining,
    inflight: v.handedOff ? v.inflight : null,
    created_at: v.record.createdAt,
    last_error: entry.runtime.lastError,
    shards: entry.verdict.shards.map((s) => ({
      node: s.node,
      agent_id: s.agentId,
      rank: s.rank,
      gpus: s.gpus,
      state: s.state,
      endpoint: s.endpoint,
      restarts: s.restarts,
      message: s.message,
      log_tail: s.logTail,
      kv_events: s.kvEvents === null ? null : { endpoint: s.kvEvents.endpoint, replay_endpoint: s.kvEvents.replayEndpoint, topic: s.kvEvents.topic },
    })),
  };
}

export function replicasStatus(manager: FleetManager, now: number): { replicas: ReplicaStatus[]; failed: FailedReplicaStatus[] } {
  const view = manager.view(now);
  return {
    replicas: view.replicas.map((v) => replicaStatus(manager, v)).sort((a, b) => a.model.localeCompare(b.model) || a.id.localeCompare(b.id)),
    failed: manager.state.failed.map((f) => ({ id: f.id, model: f.model, nodes: f.nodes, at: f.at, reason: f.reason, log_tail: f.logTail })),
  };
}

export function modelsStatus(manager: FleetManager, now: number): ModelStatus[] {
  const view = manager.view(now);
  const models = [...manager.state.models.values()].map((m) => m.spec);
  const held = manager.adapters.views(models, manager.state.replicas.values(), now).filter((v) => v.serving);
  return [...manager.state.models.values()]
    .sort((a, b) => a.spec.name.localeCompare(b.spec.name))
    .map((m) => {
      const mine = view.replicas.filter((r) => r.record.model === m.spec.name);
      const backoff = manager.state.backoff.get(m.spec.name);
      return {
        name: m.spec.name,
        source: m.source,
        desired: m.spec.replicas,
        active: mine.filter(isActive).length,
        ready: mine.filter((r) => r.phase === "Ready").length,
        serving: mine.filter((r) => r.record.draining === null && isServing(r)).length,
        leaving: mine.filter((r) => r.record.draining !== null).length,
        failures: backoff?.failures ?? 0,
        next_attempt_in_ms: backoff && backoff.until > now ? backoff.until - now : null,
        pinned: m.pinnedAt !== undefined,
        spec: fleetModelWire(m.spec),
        adapters: m.spec.adapters.map((a) => {
          const on = (pick: (v: (typeof held)[number]) => readonly string[]) =>
            held.filter((v) => v.model === m.spec.name && pick(v).includes(a.name)).map((v) => v.id);
          const last = manager.adapterLastRequestAt(a.name);
          return {
            name: a.name,
            path: a.path,
            loaded_on: on((v) => v.listed),
            running_on: on((v) => v.running),
            waiting_on: on((v) => v.waiting),
            last_request_ms_ago: last === undefined ? null : Math.max(0, now - last),
          };
        }),
      };
    });
}

export function placementStatus(manager: FleetManager, model: string): PlacementStatus | undefined {
  const r = manager.explain(model);
  if (!r) return undefined;
  return {
    model,
    requested: r.requested,
    placed: r.placements.length,
    unplaced_reason: r.unplacedReason,
    candidates: r.candidates.map((c) => ({
      node: c.node,
      gpus: c.gpus,
      gpu_class: c.gpuClass,
      verdict: c.verdict,
      rank: c.rank,
      reasons: c.reasons,
      score: c.score === null ? null : { model_replicas: c.score.modelReplicas, free_gpus_after: c.score.freeGpusAfter },
    })),
    placements: r.placements,
    decision: r.decision === null ? null : { rule: r.decision.rule, winner: r.decision.winner, runner_up: r.decision.runnerUp },
  };
}

/** What one leaving replica waits for, in words. */
function waitingFor(r: ReplicaView, view: ReconcileView, unplacedReason: string | null): string[] {
  if (r.record.draining === null) return ["to be marked draining"];
  const s = leaveState(r, view);
  const out: string[] = [];
  if (s.holdsRotation && s.inRotation) out.push(`stays in rotation until its replacement serves`);
  if (s.awaitingReplacement)
    out.push(
      `a replacement of ${r.record.model} to serve (${s.serving} of ${s.desired} serving besides the leaving ones)${unplacedReason ? `; no place for it: ${unplacedReason}` : ""}`,
    );
  if (s.inflight > 0) out.push(`${s.inflight} request(s) in flight`);
  if (out.length > 0 && !s.graceOver) out.push(`or the grace period, ${Math.ceil(s.graceLeftMs / 1000)} s left`);
  if (out.length === 0 || s.graceOver) out.push(r.busy ? "its agent to stop it" : "to be stopped");
  return out;
}

export function drainProgress(manager: FleetManager, op: DrainOp, now: number): DrainProgress {
  const view = manager.view(now);
  const unplaced = new Map<string, string | null>();
  const onNode = view.replicas.filter((r) => r.record.shards.some((s) => s.node === op.node));
  const replicas = onNode.map((r) => {
    if (!unplaced.has(r.record.model)) unplaced.set(r.record.model, manager.explain(r.record.model)?.unplacedReason ?? null);
    return { id: r.record.id, model: r.record.model, phase: r.phase, waiting_for: waitingFor(r, view, unplaced.get(r.record.model) ?? null) };
  });
  const running = op.state === "running";
  return {
    node: op.node,
    state: op.state,
    started_at: op.startedAt,
    grace_ms: op.graceMs,
    grace_left_ms: running ? Math.max(0, op.startedAt + op.graceMs - now) : null,
    finished_at: op.finishedAt,
    replicas,
    waiting_for: running ? replicas.flatMap((r) => r.waiting_for.map((w) => `${r.id}: ${w}`)) : [],
  };
}

/** The autoscaled models with their inputs and last decisions (empty without an autoscaler). */
export function autoscaleStatus(manager: FleetManager): AutoscaleStatus[] {
  const leader = manager.isLeader();
  return (manager.autoscaler?.status() ?? [])
    .sort((a, b) => a.model.localeCompare(b.model))
    .map((m) => {
      const p = m.policy;
      const pinnedAt = manager.state.models.get(m.model)?.pinnedAt;
      return {
        model: m.model,
        leader,
        pinned: m.pinned,
        pinned_at: pinnedAt === undefined ? null : new Date(pinnedAt).toISOString(),
        current: m.current,
        ready: m.ready,
        desired: m.desired,
        policy: {
          law: p.law,
          min_replicas: p.minReplicas,
          max_replicas: p.maxReplicas,
          slo: { ttft_ms: p.slo.ttftMs, itl_ms: p.slo.itlMs, percentile: p.slo.percentile },
          interval_ms: p.intervalMs,
          scale_up_window_ms: p.scaleUpWindowMs,
          scale_down_window_ms: p.scaleDownWindowMs,
          max_surge: p.maxSurge,
          scale_down_every_ms: p.scaleDownEveryMs,
          target_utilization: p.targetUtilization,
          assumed_startup_ms: p.startupMs,
          prompt_tokens_per_replica_s: p.promptTokensPerReplicaS ?? null,
        },
        startup_ms: m.measuredStartupMs === null ? null : Math.round(m.measuredStartupMs),
        decisions: [...m.decisions]
          .reverse()
          .map((d) => ({ at: new Date(d.at).toISOString(), current: d.current, asked: d.asked, desired: d.desired, reason: d.reason, figures: d.figures })),
      };
    });
}
