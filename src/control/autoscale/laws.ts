/**
 * The control laws: each turns the signal window into the replica count it
 * asks for, with the reason and the figures it used. Stabilization (bounds,
 * windows, surge, pacing) is applied after, in autoscaler.ts.
 *
 * `capacity` (the default) is feed-forward: demand is forecast one start-up
 * ahead (the arrival rate and its upward trend, times the time a request
 * stays in flight: Little's law), and divided by what a replica holds —
 * the sequences its KV cache fits, learned from its engine's metrics, and
 * fewer where the measured inter-token time says the batch is too slow.
 * A replica also prefills only so many prompt tokens a second: the forecast
 * prompt-token rate over that throughput is a second floor (`prefill`), the
 * one that binds on long prompts, where compute runs out before the KV cache
 * fills. The throughput is given (the engine's step-time model) or learned:
 * the lowest per-replica prompt-token rate at which TTFT crossed its guard.
 * A measured SLO breach adds a replica whatever the model says, so an error
 * in it costs a decision, not the run.
 *
 * `latency` is llm-d's SLO-aware KEDA formula (guides/workload-autoscaling/
 * README.slo-aware.md in llm-d/llm-d): the signal is the worse of the
 * percentile TTFT and ITL over their SLOs, clamped at 2 and averaged over
 * 45 s; above 0.55 it scales up by the ratio (credited for replicas still
 * starting), below 0.40 down, between them it holds. It reacts to latency
 * that has already risen, so its cost is the violations paid while new
 * replicas start.
 */
import type { AutoscaleLaw, AutoscalePolicy } from "./policy.ts";
import type { SignalHistory } from "./signals.ts";

/** Why a law asked for what it did (a closed set). */
export type AskReason = "forecast" | "prefill" | "idle" | "slo-breach" | "latency-high" | "latency-low" | "hold" | "no-data";

interface LawAsk {
  replicas: number;
  reason: AskReason;
  /** What the law read, for the decision log (null: not known). */
  figures: Record<string, number | null>;
}

export interface ControlLaw {
  readonly name: AutoscaleLaw;
  ask(h: SignalHistory, policy: AutoscalePolicy): LawAsk;
}

/** Latency percentiles are read over this window (llm-d's 1-minute rate windows). */
const LATENCY_WINDOW_MS = 60_000;
/** The arrival-rate trend is fitted over this window. */
const TREND_WINDOW_MS = 300_000;
/** Little's law and the KV capacity are averaged over this window. */
const LOAD_WINDOW_MS = 300_000;
/** A replica is planned to at most this share of a full KV cache (vLLM preempts when it fills). */
const KV_HEADROOM = 0.9;
/** Measured latency above this share of its SLO bounds a replica's concurrency (the capacity law). */
const LATENCY_GUARD = 0.8;
/** A replica is planned to at most this share of its prefill throughput: prompts arrive in bursts, and decodes share its steps. */
export const PREFILL_HEADROOM = 0.7;

function round(v: number | undefined, digits = 3): number | null {
  if (v === undefined || !Number.isFinite(v)) return null;
  const f = 10 ** digits;
  return Math.round(v * f) / f;
}

/** The worse of the measured TTFT and ITL percentiles over their SLOs (undefined: no sample). */
function sloRatio(h: SignalHistory, policy: AutoscalePolicy): { ratio: number | undefined; ttft: number | undefined; itl: number | undefined } {
  const ttft = h.percentile("ttftMs", policy.slo.percentile, LATENCY_WINDOW_MS);
  const itl = h.percentile("itlMs", policy.slo.percentile, LATENCY_WINDOW_MS);
  const parts = [ttft === undefined ? undefined : ttft / policy.slo.ttftMs, itl === undefined ? undefined : itl / policy.slo.itlMs].filter(
    (v): v is number => v !== undefined,
  );
  return { ratio: parts.length > 0 ? Math.max(...parts) : undefined, ttft, itl };
}

class CapacityLaw implements ControlLaw {
  readonly name = "capacity";
  /**
   * What a replica was last seen to hold: a light load tells nothing of a
   * full cache (usage too low to read) and gives no spread to fit TPOT on,
   * so the last estimates stand until new ones are read.
   */
  private fullCache: number | undefined;
  private fit: { a: number; b: number } | undefined;
  /** The highest prompt-token rate a replica was seen to serve within the TTFT guard, tokens/s (a floor on its throughput). */
  private promptRateServed: number | undefined;
  /** The lowest prompt-token rate a replica was seen to serve with TTFT past its guard, tokens/s (its knee, or above it). */
  private promptRateKnee: number | undefined;

  ask(h: SignalHistory, policy: AutoscalePolicy): LawAsk {
    const last = h.latest();
    const current = last?.provisioned ?? 0;
    const inflight = last?.inflight ?? 0;
    const startupMs = last?.startupMs ?? policy.startupMs;
    const rateNow = Math.max(h.rate(policy.intervalMs) ?? 0, h.rate(LATENCY_WINDOW_MS) ?? 0);
    const slope = Math.max(0, h.rateSlope(TREND_WINDOW_MS));
    const forecastRate = rateNow + slope * ((startupMs + policy.intervalMs) / 1000);
    // Little's law over the load window: how long a request stays, at the concurrency that window ran.
    const inFlightS = h.timeInFlight(LOAD_WINDOW_MS);
    const runningNow = h.runningPerReplica(LOAD_WINDOW_MS);
    this.fit = h.tpotFit(LOAD_WINDOW_MS, LATENCY_WINDOW_MS * 0.75) ?? this.fit;
    this.fullCache = h.sequencesPerFullCache(LOAD_WINDOW_MS) ?? this.fullCache;
    const { fit, fullCache } = this;
    const slo = sloRatio(h, policy);
    const prefill = this.prefillAsk(h, policy, slo.ttft, rateNow > 0 ? forecastRate / rateNow : 1);
    // A replica holds what its KV cache fits, and no more than keeps its inter-token time within the SLO.
    let itlBound: number | undefined;
    if (fit) itlBound = (LATENCY_GUARD * policy.slo.itlMs - fit.a) / fit.b;
    else if (slo.itl !== undefined && runningNow !== undefined && slo.itl > LATENCY_GUARD * policy.slo.itlMs)
      itlBound = (runningNow * LATENCY_GUARD * policy.slo.itlMs) / slo.itl;
    const perReplica = Math.max(0, Math.min(fullCache === undefined ? Infinity : fullCache * KV_HEADROOM, itlBound ?? Infinity));
    const planned = perReplica * policy.targetUtilization;
    // Sequences each of n replicas would run at the forecast rate: c = λ/n · W(c), the time in flight growing with the
    // time per token (W ∝ τ: decode dominates a request's stay); τ(c) = a + b·c when fitted, else as now.
    const tauNow = fit && runningNow !== undefined ? fit.a + fit.b * runningNow : undefined;
    const concurrencyAt = (n: number): number => {
      if (inFlightS === undefined) return Infinity;
      const flat = (forecastRate * inFlightS) / n;
      if (!fit || tauNow === undefined || tauNow <= 0) return flat;
      const k = flat / tauNow;
      return k * fit.b >= 1 ? Infinity : (k * fit.a) / (1 - k * fit.b);
    };
    const figures = {
      arrival_rps: round(rateNow),
      trend_rps_per_s: round(slope, 5),
      forecast_rps: round(forecastRate),
      in_flight_s: round(inFlightS),
      running_per_replica: round(runningNow, 1),
      tpot_a_ms: round(fit?.a, 2),
      tpot_b_ms: round(fit?.b, 4),
      sequences_per_replica: round(perReplica, 1),
      ttft_ms: round(slo.ttft, 1),
      itl_ms: round(slo.itl, 2),
      startup_s: round(startupMs / 1000, 1),
      forecast_prompt_tokens_s: round(prefill.forecastTokensS, 0),
      prefill_tokens_per_replica_s: round(prefill.perReplica, 0),
      prefill_replicas: prefill.replicas,
    };
    const breached = slo.ratio !== undefined && slo.ratio > 1;
    // Nothing arrived over the load window and nothing is in flight: there is no demand, whatever is known of a replica.
    if (h.rate(LOAD_WINDOW_MS) === 0 && inflight === 0) return { replicas: 0, reason: "idle", figures };
    if (!Number.isFinite(perReplica) || perReplica <= 0 || inFlightS === undefined) {
      if (breached && prefill.replicas <= current) return { replicas: current + 1, reason: "slo-breach", figures };
      if (prefill.replicas > current) return { replicas: prefill.replicas, reason: "prefill", figures };
      return { replicas: current, reason: "no-data", figures };
    }
    // What is in flight now must fit too (a backlog already queued is demand the forecast does not see).
    let sequences = Math.max(1, Math.ceil(inflight / planned));
    while (sequences <= policy.maxReplicas && concurrencyAt(sequences) > planned) sequences++;
    const asked = Math.max(sequences, prefill.replicas);
    if (breached && asked <= current) return { replicas: current + 1, reason: "slo-breach", figures };
    if (asked === current) return { replicas: asked, reason: "hold", figures };
    return { replicas: asked, reason: prefill.replicas > sequences ? "prefill" : "forecast", figures };
  }

  /**
   * Replicas the forecast prompt-token rate needs (0: the rate or a
   * replica's throughput is not known): the rate now, raised by the
   * forecast's trend (`growth`, the forecast arrival rate over today's),
   * over what each replica is planned to prefill. The throughput is the
   * policy's, or else the knee learned from traffic: the lowest
   * per-replica rate at which TTFT crossed its guard. Either is planned to
   * the headroom and the target utilization, and never below the highest
   * rate a replica was seen to serve within the guard. Until TTFT has
   * crossed it there is no knee to plan from, and no bound.
   */
  private prefillAsk(
    h: SignalHistory,
    policy: AutoscalePolicy,
    ttftMs: number | undefined,
    growth: number,
  ): { replicas: number; forecastTokensS: number | undefined; perReplica: number | undefined } {
    const served = h.promptTokenRatePerReplica(LATENCY_WINDOW_MS);
    if (served !== undefined && ttftMs !== undefined) {
      if (ttftMs <= LATENCY_GUARD * policy.slo.ttftMs) this.promptRateServed = Math.max(this.promptRateServed ?? 0, served);
      else this.promptRateKnee = Math.min(this.promptRateKnee ?? Infinity, served);
    }
    const planned = PREFILL_HEADROOM * policy.targetUtilization;
    let perReplica: number | undefined;
    if (policy.promptTokensPerReplicaS !== undefined) perReplica = policy.promptTokensPerReplicaS * planned;
    else if (this.promptRateKnee !== undefined) perReplica = Math.max(this.promptRateKnee * planned, this.promptRateServed ?? 0);
    // Over a minute: a burst of seconds queues within the TTFT SLO and the headroom, where a sequence would hold its KV blocks.
    const now = h.promptTokenRate(LATENCY_WINDOW_MS);
    const forecastTokensS = now === undefined ? undefined : now * growth;
    if (forecastTokensS === undefined || perReplica === undefined || perReplica <= 0) return { replicas: 0, forecastTokensS, perReplica };
    return { replicas: Math.ceil(forecastTokensS / perReplica), forecastTokensS, perReplica };
  }
}

/** llm-d's thresholds, clamp and smoothing window. */
const LATENCY_UP = 0.55;
const LATENCY_DOWN = 0.4;
const LATENCY_CLAMP = 2;
const LATENCY_SMOOTHING_MS = 45_000;

class LatencyLaw implements ControlLaw {
  readonly name = "latency";
  /** The clamped signal at each decision, for the moving average. */
  private readonly signals: { at: number; s: number }[] = [];

  ask(h: SignalHistory, policy: AutoscalePolicy): LawAsk {
    const last = h.latest();
    const n = last?.provisioned ?? 0;
    const r = last?.ready ?? 0;
    const at = last?.at ?? 0;
    const slo = sloRatio(h, policy);
    this.signals.push({ at, s: Math.min(slo.ratio ?? 0, LATENCY_CLAMP) });
    while (this.signals.length > 1 && this.signals[0]!.at <= at - LATENCY_SMOOTHING_MS) this.signals.shift();
    const s = this.signals.reduce((a, x) => a + x.s, 0) / this.signals.length;
    const figures = { signal: round(s), ttft_ms: round(slo.ttft, 1), itl_ms: round(slo.itl, 2), ready: r };
    if (s > LATENCY_UP) {
      // Replicas still starting will take their share: ask only for the deficit beyond them (never fewer: shedding reads the uncredited signal).
      const credit = r > 0 && r < n ? r / n : 1;
      return { replicas: Math.max(n, n + Math.ceil(n * ((s * credit) / LATENCY_UP - 1))), reason: "latency-high", figures };
    }
    if (s < LATENCY_DOWN) return { replicas: n - Math.floor(n * (1 - s / LATENCY_DOWN)), reason: "latency-low", figures };
    return { replicas: n, reason: "hold", figures };
  }
}

export function lawFor(name: AutoscaleLaw): ControlLaw {
  return name === "capacity" ? new CapacityLaw() : new LatencyLaw();
}
