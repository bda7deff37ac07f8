/**
 * Scorer `queue-depth`: fewer requests waiting in the engine is better.
 *
 * Consumes `waiting` (engine-reported queue, e.g. vllm:num_requests_waiting).
 * score = 1 - (waiting - min) / (max + 1), min and max over the candidates
 * that report it: the least loaded scores 1, all equal → all 1, and the
 * spread is relative to the fleet's load level (10 vs 11 waiting are close,
 * 0 vs 1 are not); the +1 keeps it defined at max = 0 and every known
 * endpoint above 0. An endpoint whose `waiting` is absent or stale scores 0,
 * below every known one: a replica nothing has reported must never look
 * like the idlest in the fleet (the `inflight` scorer still spreads load
 * among such endpoints). Tiered by free batch slot like every load scorer
 * (free-slot-tiers.ts): a waiting count a poll old does not send a request
 * to an engine whose slots are all taken while another has one free.
 */
import { tierByFreeSlot } from "../free-slot-tiers.ts";
import type { EndpointView, RequestView, SchedulingContext, Scorer } from "../types.ts";

/** Score given to an endpoint whose engine has not reported a queue depth. */
const QUEUE_DEPTH_ABSENT_SCORE = 0;

export const queueDepth: Scorer = {
  name: "queue-depth",
  consumes: ["engine-load", "inflight"],
  score: function queueDepthScore(_req: RequestView, endpoints: readonly EndpointView[], _ctx: SchedulingContext): number[] {
    let min = Infinity;
    let max = 0;
    for (const e of endpoints) {
      const w = e.waiting;
      if (w === undefined || !Number.isFinite(w)) continue;
      const c = w > 0 ? w : 0;
      if (c > max) max = c;
      if (c < min) min = c;
    }
    const out = new Array<number>(endpoints.length);
    for (let i = 0; i < endpoints.length; i++) {
      const w = endpoints[i]!.waiting;
      if (w === undefined || !Number.isFinite(w)) out[i] = QUEUE_DEPTH_ABSENT_SCORE;
      else out[i] = 1 - ((w > 0 ? w : 0) - min) / (max + 1);
    }
    return tierByFreeSlot(endpoints, out);
  },
};
