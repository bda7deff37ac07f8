/**
 * One model's autoscaler: each decision adds a sample to the signal window,
 * asks the control law, and stabilizes the ask into the desired replica
 * count — one replica for a model at zero that requests reach; within the
 * bounds, no higher than the lowest ask of the scale-up window and no lower
 * than the highest of the scale-down window,
 * no more replicas starting at once than the surge allows, one removal per
 * scale-down period, and never more than placement can hold. Each decision
 * keeps its reason and the figures it read. Pure: the caller samples and
 * applies the count (the fleet manager; the twin).
 */
import { type AskReason, type ControlLaw, lawFor } from "./laws.ts";
import type { AutoscalePolicy } from "./policy.ts";
import { type AutoscaleSample, SignalHistory } from "./signals.ts";

/** Why the desired count is what it is: the law's reason, or what stabilization held it to (a closed set). */
type DecisionReason = AskReason | "cold-start" | "min-replicas" | "max-replicas" | "up-window" | "down-window" | "surge" | "pacing" | "no-gpus";

export interface AutoscaleDecision {
  at: number;
  /** Replicas placed and not leaving when it was taken. */
  current: number;
  /** What the law asked for. */
  asked: number;
  desired: number;
  reason: DecisionReason;
  figures: Record<string, number | null>;
}

/** Decisions kept for `ctl`-style views. */
const KEPT_DECISIONS = 100;
/** The signal window keeps this much history (the longest any law reads). */
const HISTORY_MS = 600_000;

export class Autoscaler {
  private readonly history = new SignalHistory(HISTORY_MS);
  private readonly law: ControlLaw;
  private readonly asks: { at: number; replicas: number }[] = [];
  private lastScaleDownAt = -Infinity;
  private readonly kept: AutoscaleDecision[] = [];

  constructor(readonly policy: AutoscalePolicy) {
    this.law = lawFor(policy.law);
  }

  /** The decisions taken, oldest first (the last KEPT_DECISIONS). */
  decisions(): readonly AutoscaleDecision[] {
    return this.kept;
  }

  decide(sample: AutoscaleSample): AutoscaleDecision {
    const p = this.policy;
    this.history.add(sample);
    const ask = this.law.ask(this.history, p);
    const current = sample.provisioned;
    const at = sample.at;
    let reason: DecisionReason = ask.reason;
    let target = ask.replicas;
    // A model at zero that requests reach: one replica now, whatever the law (which has nothing to learn from yet) says.
    if (current === 0 && target < 1 && p.maxReplicas > 0 && (sample.arrivals > 0 || sample.inflight > 0)) {
      target = 1;
      reason = "cold-start";
    }
    if (target < p.minReplicas) {
      target = p.minReplicas;
      if (current <= p.minReplicas) reason = "min-replicas";
    } else if (target > p.maxReplicas) {
      target = p.maxReplicas;
      reason = "max-replicas";
    }
    this.asks.push({ at, replicas: target });
    const keepFrom = at - Math.max(p.scaleUpWindowMs, p.scaleDownWindowMs);
    while (this.asks.length > 1 && this.asks[0]!.at <= keepFrom) this.asks.shift();
    let desired = current;
    if (target > current) {
      desired = target;
      const floor = Math.max(current, this.lowestAsk(at - p.scaleUpWindowMs));
      if (floor < desired) {
        desired = floor;
        reason = "up-window";
      }
      const starting = current - sample.ready;
      const surgeRoom = Math.max(0, p.maxSurge - starting);
      if (desired > current + surgeRoom) {
        desired = current + surgeRoom;
        reason = "surge";
      }
      if (sample.placeable !== undefined && desired > current + sample.placeable) {
        desired = current + sample.placeable;
        reason = "no-gpus";
      }
    } else if (target < current) {
      const ceiling = Math.max(target, this.highestAsk(at - p.scaleDownWindowMs));
      if (ceiling >= current) {
        reason = "down-window";
      } else if (at - this.lastScaleDownAt < p.scaleDownEveryMs) {
        reason = "pacing";
      } else {
        desired = current - 1;
        this.lastScaleDownAt = at;
      }
    }
    const d: AutoscaleDecision = { at, current, asked: ask.replicas, desired, reason, figures: ask.figures };
    this.kept.push(d);
    if (this.kept.length > KEPT_DECISIONS) this.kept.shift();
    return d;
  }

  private lowestAsk(from: number): number {
    let v = Infinity;
    for (const a of this.asks) if (a.at >= from) v = Math.min(v, a.replicas);
    return v;
  }

  private highestAsk(from: number): number {
    let v = -Infinity;
    for (const a of this.asks) if (a.at >= from) v = Math.max(v, a.replicas);
    return v;
  }
}
