/**
 * How one model's autoscaler behaves: its bounds, the latency targets it
 * sizes for, the control law, and the stabilization that keeps it from
 * flapping. Plain data; the defaults are named constants.
 */

/** The control laws: `capacity` sizes for forecast demand over a learned per-replica capacity; `latency` follows the SLO ratio (llm-d's KEDA formula). */
export type AutoscaleLaw = "capacity" | "latency";

export interface AutoscalePolicy {
  minReplicas: number;
  maxReplicas: number;
  slo: {
    /** Time to first token each request should meet, ms. */
    ttftMs: number;
    /** Mean time between a request's output tokens (TPOT) it should meet, ms. */
    itlMs: number;
    /** The percentile of requests held to both, in (0, 100). */
    percentile: number;
  };
  law: AutoscaleLaw;
  /** How often a decision is taken, ms. */
  intervalMs: number;
  /** A scale-up goes no higher than the lowest ask over this window (0: the latest ask), ms. */
  scaleUpWindowMs: number;
  /** A scale-down goes no lower than the highest ask over this window, ms. */
  scaleDownWindowMs: number;
  /** Replicas starting at once, at most: a larger ask is met as those become ready. */
  maxSurge: number;
  /** At most one replica is removed per this period, ms. */
  scaleDownEveryMs: number;
  /** The capacity law plans each replica to this fraction of its learned capacity (the rest absorbs what arrives while a replica starts). */
  targetUtilization: number;
  /** The start-up time assumed until one is measured, ms. */
  startupMs: number;
  /**
   * Prompt tokens a second one replica prefills at full load (e.g. from its
   * engine's step-time model); absent, the capacity law learns it from the
   * prompt-token rate at which replicas' TTFT crossed its guard.
   */
  promptTokensPerReplicaS?: number;
}

export const DEFAULT_AUTOSCALE_INTERVAL_MS = 15_000;
export const DEFAULT_SCALE_UP_WINDOW_MS = 0;
export const DEFAULT_SCALE_DOWN_WINDOW_MS = 180_000;
export const DEFAULT_MAX_SURGE = 4;
export const DEFAULT_SCALE_DOWN_EVERY_MS = 30_000;
export const DEFAULT_TARGET_UTILIZATION = 0.85;
export const DEFAULT_STARTUP_MS = 120_000;
