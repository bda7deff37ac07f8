/**
 * What a failed upstream attempt says about its endpoint (the circuit
 * breaker's input), in one place for the attempt loop and for a stream's
 * continuation attempts: an engine's 4xx means a healthy engine, a 429 a
 * cool-down for its Retry-After, an endpoint fault counts against it unless
 * the gateway's own stall excused it, anything else is no verdict.
 */
import type { AttemptVerdict } from "../request/exchange.ts";
import { ENDPOINT_FAULTS } from "./failures.ts";
import type { AttemptFailed } from "./upstream.ts";

export function attemptVerdict(result: AttemptFailed, maxRetryAfterMs: number): AttemptVerdict {
  const failure = result.failure;
  if (failure === "cancelled") return { kind: "neutral" };
  if (failure === "status_4xx") return { kind: "healthy", failure }; // the engine is healthy; the request was not
  if (failure === "status_429") return { kind: "cool_down", failure, ms: Math.min(result.retryAfterMs ?? maxRetryAfterMs, maxRetryAfterMs) };
  return ENDPOINT_FAULTS.has(failure) && !result.excused ? { kind: "fault", failure } : { kind: "neutral", failure, excused: result.excused === true };
}
