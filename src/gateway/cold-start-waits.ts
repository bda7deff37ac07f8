/** What the cold-start gate asks of the fleet about models it scales to zero (implemented in serve over the fleet manager). */

/** How one request's wait for a cold start ended. */
export type ColdStartOutcome = { kind: "serving" } | { kind: "timeout"; retryAfterS: number } | { kind: "aborted" } | { kind: "full"; waiting: number };

/** The fleet's side: which models are at zero now, and the wait for one of their replicas. */
export interface ColdStartWaits {
  /** How long a request for `model` waits now (undefined: the model is not at zero, or does not scale from zero). */
  waitFor(model: string): number | undefined;
  /** Ask for a replica of `model` (once per cold start) and wait for one to serve. */
  wait(model: string, x: { requestId: string; tenant: string; path: string }, signal: AbortSignal, waitMs: number): Promise<ColdStartOutcome>;
}
