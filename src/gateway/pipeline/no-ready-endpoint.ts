/**
 * The answer for a model that is configured or expected but that nothing
 * ready serves now — not discovered yet (the gateway just started, its
 * upstream unreachable), the fleet's replicas not ready, every upstream
 * unready or its circuits open: 503 NO_READY_ENDPOINT with Retry-After,
 * never a 404. Its code, status, Retry-After and message prefix are what a
 * client (the batch runner included) may rely on to wait and retry.
 */
import { LlmgwError } from "../../shared/errors.ts";

/** Retry-After, s: the health poll and the circuit probes notice a change within about this. */
const NO_READY_RETRY_AFTER_S = 1;

/** 503 NO_READY_ENDPOINT for `model` (the name the client asked for), with Retry-After; `why` is appended to the stable message. */
export function noReadyEndpoint(model: string, why?: string): LlmgwError {
  return new LlmgwError("NO_READY_ENDPOINT", `no ready endpoint serves model '${model}'${why === undefined ? "" : `: ${why}`}`, {
    retryAfterS: NO_READY_RETRY_AFTER_S,
  });
}
