/**
 * Where the fleet's LoRA adapters go (pure). A model in `fleet.models` may
 * declare adapters; its replicas start with LoRA on and load none. Each
 * tick, for each such model:
 *
 * - an adapter with requests waiting for it (the gateway holds a request
 *   for an adapter no serving replica lists) is loaded on one: the replica
 *   holding the fewest adapters, ties to the adapter's home (a rendezvous
 *   hash, stable across ticks and gateways);
 * - an adapter whose requests queue on every replica holding it because
 *   other adapters run in all its slots, and that some replica lacks, is
 *   loaded on one more — where its demand is (a request merely queued for a
 *   step, with a slot free, is not that);
 * - an adapter not used on a replica (not running, not queued there) for
 *   `idleUnloadMs` is unloaded there, as is one the model no longer declares.
 *
 * One action per (replica, adapter) at a time; what is in flight is skipped.
 */
import type { FleetModelSpec } from "../config/types.ts";

export interface AdapterReplicaView {
  /** The fleet replica (also its endpoint id). */
  id: string;
  model: string;
  /** In rotation and answering the gateway's health poll: it can take a load and serve it. */
  serving: boolean;
  /** Adapters its engine lists in /v1/models. */
  listed: readonly string[];
  /** Adapters with requests in its running batch, and in its queue (vllm:lora_requests_info). */
  running: readonly string[];
  waiting: readonly string[];
  /** Every GPU slot runs an adapter: a request for another one waits there. */
  slotsFull: boolean;
}

export interface AdapterPlanInput {
  now: number;
  idleUnloadMs: number;
  models: readonly FleetModelSpec[];
  replicas: readonly AdapterReplicaView[];
  /** When a request last named the adapter (at this gateway). */
  lastRequestAt(adapter: string): number | undefined;
  /** Requests waiting for the adapter to be loaded somewhere. */
  waitingForLoad(adapter: string): number;
  /** When the adapter was last running, queued or loaded on the replica. */
  lastUsed(replica: string, adapter: string): number | undefined;
  /** A call for (replica, adapter) is under way. */
  inFlight(replica: string, adapter: string): boolean;
}

export type AdapterAction =
  | { kind: "load-adapter"; model: string; replica: string; adapter: string; path: string; why: "demand" | "queued-everywhere" }
  | { kind: "unload-adapter"; model: string; replica: string; adapter: string; why: "idle" | "not-declared" };

/** An integer mix of two strings (FNV-1a, then murmur3's finalizer): the same everywhere. */
export function rendezvousHash(a: string, b: string): number {
  let h = 0x811c9dc5;
  for (const s of [a, "\u0000", b]) {
    for (let i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 0x01000193);
    }
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The replica that takes a new adapter: fewest adapters listed (loads planned this tick count), then the adapter's home. */
function pick(candidates: readonly AdapterReplicaView[], adapter: string, planned: Map<string, number>): AdapterReplicaView | undefined {
  let best: AdapterReplicaView | undefined;
  let bestLoad = Infinity;
  let bestHash = -1;
  for (const r of candidates) {
    const load = r.listed.length + (planned.get(r.id) ?? 0);
    const hash = rendezvousHash(adapter, r.id);
    if (load < bestLoad || (load === bestLoad && hash > bestHash)) {
      best = r;
      bestLoad = load;
      bestHash = hash;
    }
  }
  return best;
}

export function planAdapters(input: AdapterPlanInput): AdapterAction[] {
  const out: AdapterAction[] = [];
  const planned = new Map<string, number>();
  for (const model of input.models) {
    const replicas = input.replicas.filter((r) => r.model === model.name);
    const serving = replicas.filter((r) => r.serving);
    const declared = new Map(model.adapters.map((a) => [a.name, a]));

    for (const r of serving) {
      for (const name of r.listed) {
        if (input.inFlight(r.id, name)) continue;
        if (!declared.has(name)) {
          out.push({ kind: "unload-adapter", model: model.name, replica: r.id, adapter: name, why: "not-declared" });
          continue;
        }
        if (r.running.includes(name) || r.waiting.includes(name)) continue;
        const used = input.lastUsed(r.id, name);
        if (used !== undefined && input.now - used >= input.idleUnloadMs)
          out.push({ kind: "unload-adapter", model: model.name, replica: r.id, adapter: name, why: "idle" });
      }
    }

    for (const a of model.adapters) {
      if (serving.some((r) => input.inFlight(r.id, a.name))) continue;
      const holders = serving.filter((r) => r.listed.includes(a.name));
      const lacking = serving.filter((r) => !r.listed.includes(a.name));
      const last = input.lastRequestAt(a.name);
      // Requests arriving for an adapter loaded nowhere wait for it: that is the demand that loads it (not a request
      // seen before an idle unload, which would load it right back).
      let why: "demand" | "queued-everywhere" | undefined;
      if (holders.length === 0) why = input.waitingForLoad(a.name) > 0 ? "demand" : undefined;
      else if (
        last !== undefined &&
        input.now - last < input.idleUnloadMs &&
        holders.every((r) => r.waiting.includes(a.name) && !r.running.includes(a.name) && r.slotsFull)
      )
        why = "queued-everywhere";
      if (why === undefined) continue;
      const target = pick(lacking, a.name, planned);
      if (!target) continue;
      planned.set(target.id, (planned.get(target.id) ?? 0) + 1);
      out.push({ kind: "load-adapter", model: model.name, replica: target.id, adapter: a.name, path: a.path, why });
    }
  }
  return out;
}
