/**
 * Scorer `queue-depth`: fewer requests waiting in the engine is better.
 *
 * Consumes `waiting` (engine-reported queue, e.g. vllm:num_requests_waiting).
 * score = 1 - waiting / max(waiting over candidates that report it); all
 * known values equal (including all 0) → 1. An endpoint whose `waiting` is
 * absent or stale scores 0, the same as the most loaded known endpoint: a
 * replica nothing has reported must never look like the idlest in the fleet
 * (the `inflight` scorer still spreads load among such endpoints).
 */
import type { EndpointView, RequestView, Scorer, SchedulingContext } from "../types.ts";

/** Score given to an endpoint whose engine has not reported a queue depth. */
export const QUEUE_DEPTH_ABSENT_SCORE = 0;

export const queueDepth: Scorer = {
  name: "queue-depth",
  score: function queueDepthScore(_req: RequestView, endpoints: readonly EndpointView[], _ctx: SchedulingContext): number[] {
    let max = 0;
    for (const e of endpoints) {
      const w = e.waiting;
      if (w !== undefined && w > max && Number.isFinite(w)) max = w;
    }
    const out = new Array<number>(endpoints.length);
    for (let i = 0; i < endpoints.length; i++) {
      const w = endpoints[i]!.waiting;
      if (w === undefined || !Number.isFinite(w)) out[i] = QUEUE_DEPTH_ABSENT_SCORE;
      else out[i] = max === 0 || w <= 0 ? 1 : 1 - w / max;
    }
    return out;
  },
};
