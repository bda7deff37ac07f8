/** Replica states and the pure decisions behind them: readiness from two probes, restart backoff. */

/**
 * Starting: the process is up, /health does not answer 200 yet.
 * Loading: /health is 200, /v1/models does not list the model yet (weights loading).
 * Ready: both. Failed: exited (exit code and log tail kept). Stopped: stopped on request.
 */
export type ReplicaState = "Starting" | "Loading" | "Ready" | "Failed" | "Stopped";

export interface ProbeResult {
  /** GET /health answered 200. */
  healthy: boolean;
  /** GET /v1/models answered 200 and listed the model. */
  modelListed: boolean;
}

/** The state of a live process from its probes. */
export function readinessState(probe: ProbeResult): "Starting" | "Loading" | "Ready" {
  if (!probe.healthy) return "Starting";
  return probe.modelListed ? "Ready" : "Loading";
}

export interface RestartPolicy {
  /** Restarts allowed after crashes before the replica stays Failed. */
  maxRestarts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** A run at least this long resets the restart count (the crash is not a crash loop). */
  resetAfterMs: number;
}

export const DEFAULT_RESTART_POLICY: Readonly<RestartPolicy> = Object.freeze({
  maxRestarts: 5,
  baseDelayMs: 1_000,
  maxDelayMs: 60_000,
  resetAfterMs: 300_000,
});

type RestartDecision = { restart: true; delayMs: number; restarts: number } | { restart: false; restarts: number };

/** After a crash: restart with exponential backoff (base × 2^n, capped), or give up after maxRestarts. */
export function decideRestart(policy: RestartPolicy, restartsSoFar: number, ranForMs: number): RestartDecision {
  const prior = ranForMs >= policy.resetAfterMs ? 0 : restartsSoFar;
  if (prior >= policy.maxRestarts) return { restart: false, restarts: prior };
  const delayMs = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** prior);
  return { restart: true, delayMs, restarts: prior + 1 };
}

/** Whether an OpenAI `/v1/models` body lists `model` (by id, or by `root` as vLLM reports the served path). */
export function modelsListModel(body: unknown, model: string): boolean {
  if (body === null || typeof body !== "object") return false;
  const data = (body as { data?: unknown }).data;
  if (!Array.isArray(data)) return false;
  return data.some((m: unknown) => {
    if (m === null || typeof m !== "object") return false;
    const rec = m as { id?: unknown; root?: unknown };
    return rec.id === model || rec.root === model;
  });
}
