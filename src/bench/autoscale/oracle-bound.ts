/**
 * How low any autoscaler could go on a trace, from the trace alone: a fleet
 * resized every period (a minute, or a decision interval) to that period's
 * prompt tokens, with perfect foresight and instant start-ups, each replica
 * holding what a replica of the static fleet holds at the peak period (the
 * static fleet's size over the peak period's tokens) — its GPU-hours
 * against the static fleet's. A second figure holds each period's count
 * over the start-up ahead, as a controller must start replicas before the
 * load they serve. A bound, not a simulation: bursts within a period make
 * any real fleet need more, which the shorter period shows.
 */
import type { AutoscaleWorkload } from "./autoscale-twin.ts";

export interface OracleBound {
  /** The period the fleet is resized at, s. */
  period_s: number;
  /** The static fleet the oracle is sized against. */
  static_replicas: number;
  /** Peak period's prompt tokens over the mean period's (scored periods). */
  peak_to_mean: number;
  /** Perfect foresight, instant start-ups: GPU-hours over the static fleet's. */
  gpu_hours_ratio: number;
  /** The same, each minute's count held from a start-up before it. */
  gpu_hours_ratio_with_startup: number;
  startup_s: number;
}

/** The bound for workload `w` against a static fleet of `staticReplicas`, resized every `periodS` (undefined: nothing scored). */
export function oracleBound(w: AutoscaleWorkload, staticReplicas: number, startupS: number, periodS: number): OracleBound | undefined {
  const periodMs = periodS * 1000;
  const tokens: number[] = [];
  for (const r of w.requests) {
    if (r.atMs < w.scoreFromMs) continue;
    const m = Math.floor((r.atMs - w.scoreFromMs) / periodMs);
    while (tokens.length <= m) tokens.push(0);
    tokens[m]! += r.segments.reduce((a, s) => a + s.tokens, 0);
  }
  // The last period is cut by the trace's end: it would read as a lull that is not there.
  if (tokens.length > 1) tokens.pop();
  const peak = Math.max(0, ...tokens);
  if (tokens.length === 0 || peak <= 0 || staticReplicas <= 0) return undefined;
  const perReplica = peak / staticReplicas;
  const need = tokens.map((t) => Math.max(w.minReplicas, Math.ceil(t / perReplica)));
  const ahead = Math.ceil((startupS * 1000) / periodMs);
  const held = need.map((_, i) => Math.max(...need.slice(i, i + ahead + 1)));
  const mean = (v: number[]) => v.reduce((a, x) => a + x, 0) / v.length;
  const round = (v: number) => Math.round(v * 1000) / 1000;
  return {
    period_s: periodS,
    static_replicas: staticReplicas,
    peak_to_mean: round(peak / mean(tokens)),
    gpu_hours_ratio: round(mean(need) / staticReplicas),
    gpu_hours_ratio_with_startup: round(mean(held) / staticReplicas),
    startup_s: startupS,
  };
}
