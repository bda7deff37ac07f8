/**
 * Scorer `lora-affinity`: send an adapter's requests where it is already
 * loaded, so an engine neither swaps adapters in and out of its GPU slots
 * nor holds a request back because its batch already has max_loras
 * adapters (vLLM's scheduler skips such a request until one leaves).
 *
 * Consumes `req.adapter` and each endpoint's `adapter` view (vLLM's
 * vllm:lora_requests_info, and the gateway's estimate of the engine's slot
 * LRU from where it sent each adapter). Scores:
 *
 *   running there (it holds a GPU slot)                               1
 *   likely still in a slot there (recently sent or seen running),
 *     and fewer adapters running than max_loras                       0.85  (scheduled at once, no load)
 *   room: fewer adapters running or waiting than max_loras            0.6   (scheduled at once, one load)
 *   queued there behind full slots                                    0.3   (runs once a slot frees)
 *   none of these                                                     0     (waits for a slot, then loads)
 *
 * plus HOME_BONUS on the adapter's home: of the candidates, the one
 * rendezvous hashing picks for it (highest mix(adapter, endpoint)). An
 * adapter loaded nowhere then goes to the same replica each time, where its
 * next request finds it; each replica's slots turn over among its own
 * adapters instead of every adapter everywhere.
 *
 * Absent is not zero: an engine whose LoRA metric is absent or stale knows
 * no room and no slot, so it scores at most the home bonus. A request
 * without an adapter scores 0 everywhere: the other scorers decide.
 */
import type { AdapterView, EndpointView, RequestView, SchedulingContext, Scorer } from "../types.ts";

export const LORA_RUNNING_SCORE = 1;
export const LORA_RESIDENT_SCORE = 0.9;
export const LORA_ROOM_SCORE = 0.5;
export const LORA_WAITING_SCORE = 0.25;
/** Less than the step from room to resident: a slot that already holds the adapter elsewhere beats room at home. */
export const HOME_BONUS = 0.25;

function below(count: number | undefined, max: number | undefined): boolean {
  return count !== undefined && max !== undefined && count < max;
}

/** The tier of one endpoint for the request's adapter (without the home bonus). */
export function loraAffinityScore(a: AdapterView | undefined): number {
  if (a === undefined) return 0;
  if (a.running) return LORA_RUNNING_SCORE;
  if (a.resident && below(a.runningAdapters, a.maxLoras)) return LORA_RESIDENT_SCORE;
  if (below(a.active, a.maxLoras)) return LORA_ROOM_SCORE;
  if (a.waiting) return LORA_WAITING_SCORE;
  return 0;
}

/** An integer mix (murmur3's finalizer) of the adapter and the endpoint: every thread and gateway computes the same home. */
export function homeHash(adapter: number, endpoint: number): number {
  let h = Math.imul(adapter + 1, 0x9e3779b1) ^ Math.imul(endpoint + 1, 0x85ebca77);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

export const loraAffinity: Scorer = {
  name: "lora-affinity",
  consumes: ["lora"],
  score: function loraAffinityScorer(req: RequestView, endpoints: readonly EndpointView[], _ctx: SchedulingContext): number[] {
    const out = new Array<number>(endpoints.length);
    const adapter = req.adapter;
    if (adapter === undefined) return out.fill(0);
    let home = -1;
    let best = -1;
    for (let i = 0; i < endpoints.length; i++) {
      const e = endpoints[i]!;
      out[i] = loraAffinityScore(e.adapter);
      const h = homeHash(adapter, e.index);
      if (h > best) {
        best = h;
        home = i;
      }
    }
    if (home >= 0) out[home]! += HOME_BONUS;
    return out;
  },
};
