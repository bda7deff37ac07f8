/**
 * Scorer `lora-affinity`: send an adapter's requests where it is already
 * loaded, so an engine neither swaps adapters in and out of its GPU slots
 * nor holds a request back because its batch already has max_loras
 * adapters (vLLM's scheduler skips such a request until one leaves).
 *
 * Consumes `req.adapter` and each endpoint's `adapter` view (vLLM's
 * vllm:lora_requests_info and the gateway's own last choice). Scores:
 *
 *   running there (in a GPU slot)                                 1
 *   room (fewer adapters running or waiting than max_loras),
 *     and the gateway sent it there last                          0.8   (vLLM reports no idle adapter; its LRU slot likely still holds it)
 *   room                                                          0.6   (it is scheduled at once, a swap at most)
 *   queued there behind full slots                                0.3   (it runs once a slot frees)
 *   none of these                                                 0     (it waits for a slot and costs a swap)
 *
 * Absent is not zero: an engine whose LoRA metric is absent or stale knows
 * no room, so only `running` (also absent then) could lift it — it scores
 * 0. A request without an adapter scores 0 everywhere: the other scorers
 * decide.
 */
import type { AdapterView, EndpointView, RequestView, Scorer, SchedulingContext } from "../types.ts";

export const LORA_RUNNING_SCORE = 1;
export const LORA_LAST_ROUTED_SCORE = 0.8;
export const LORA_ROOM_SCORE = 0.6;
export const LORA_WAITING_SCORE = 0.3;

function hasRoom(a: AdapterView): boolean {
  return a.maxLoras !== undefined && a.active !== undefined && a.active < a.maxLoras;
}

export function loraAffinityScore(a: AdapterView | undefined): number {
  if (a === undefined) return 0;
  if (a.running) return LORA_RUNNING_SCORE;
  // Slots full of other adapters mean it was swapped out since.
  if (hasRoom(a)) return a.lastRouted ? LORA_LAST_ROUTED_SCORE : LORA_ROOM_SCORE;
  if (a.waiting) return LORA_WAITING_SCORE;
  return 0;
}

export const loraAffinity: Scorer = {
  name: "lora-affinity",
  score: function loraAffinityScorer(req: RequestView, endpoints: readonly EndpointView[], _ctx: SchedulingContext): number[] {
    const out = new Array<number>(endpoints.length);
    if (req.adapter === undefined) return out.fill(0);
    for (let i = 0; i < endpoints.length; i++) out[i] = loraAffinityScore(endpoints[i]!.adapter);
    return out;
  },
};
