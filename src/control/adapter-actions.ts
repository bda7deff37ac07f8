/**
 * The fleet's LoRA adapters, the shell around adapter-plan.ts: what each
 * serving replica lists, runs and queues (from the gateway's health poll,
 * through the endpoint sink), when each adapter was last used there, and
 * the load and unload calls to the replica's agent — in the background,
 * one per (replica, adapter) at a time, counted for the metrics.
 */
import type { FleetModelSpec } from "../config/types.ts";
import type { Logger } from "../shared/logger.ts";
import { type AdapterAction, type AdapterReplicaView, planAdapters } from "./adapter-plan.ts";
import type { AgentAddress, AgentClient } from "./agent-client.ts";
import type { EndpointSink } from "./endpoint-sink.ts";
import type { ReplicaEntry } from "./fleet-state.ts";

/** What the gateway knows of the requests for each adapter (demand). */
export interface AdapterDemand {
  /** When a request last named the adapter. */
  lastRequestAt(adapter: string): number | undefined;
  /** Requests waiting for the adapter to be loaded somewhere. */
  waitingForLoad(adapter: string): number;
}

type AdapterCallResult = "ok" | "failed";

/** Counts by base model, for llmgw_fleet_adapter_loads_total and _unloads_total. */
interface AdapterCounts {
  loads: Map<string, Record<AdapterCallResult, number>>;
  unloads: Map<string, Record<AdapterCallResult, number>>;
}

interface AdapterActionContext {
  log: Logger;
  now: () => number;
  idleUnloadMs: number;
  /** The agent of a replica's rank-0 shard and its id there; undefined when the node is gone. */
  agentOf(entry: ReplicaEntry): { address: AgentAddress; agentId: string } | undefined;
  onSettled(): void;
}

const key = (replica: string, adapter: string) => `${replica}\u0000${adapter}`;

/** After a load or unload, how long the agent's answer stands for the gateway's next health poll, which has not seen it yet. */
const ADAPTER_CONFIRM_MS = 10_000;

export class AdapterActions {
  readonly counts: AdapterCounts = { loads: new Map(), unloads: new Map() };
  private readonly lastUsed = new Map<string, number>();
  private readonly inFlight = new Set<string>();
  /** (replica, adapter) → what the agent said and when, until the health poll agrees (or ADAPTER_CONFIRM_MS passes). */
  private readonly unconfirmed = new Map<string, { loaded: boolean; at: number }>();
  private readonly ops = new Set<Promise<void>>();

  constructor(
    private readonly sink: EndpointSink,
    private readonly client: AgentClient,
    private readonly demand: AdapterDemand | undefined,
    private readonly ctx: AdapterActionContext,
  ) {}

  /** The views of the replicas of models with adapters, refreshing when each adapter was last used on each. */
  views(models: readonly FleetModelSpec[], replicas: Iterable<ReplicaEntry>, now: number): AdapterReplicaView[] {
    const withAdapters = new Set(models.filter((m) => m.adapters.length > 0).map((m) => m.name));
    const out: AdapterReplicaView[] = [];
    for (const e of replicas) {
      if (!withAdapters.has(e.record.model)) continue;
      // A replica launched before the model declared adapters runs without LoRA: it takes none until replaced.
      const lora = e.record.shards[0]?.spec.lora !== undefined;
      const serving = lora && e.runtime.handedOff && e.record.draining === null && e.verdict.phase === "Ready" && (this.sink.ready?.(e.record.id) ?? true);
      const held = serving ? this.sink.adapters?.(e.record.id) : undefined;
      const view: AdapterReplicaView = {
        id: e.record.id,
        model: e.record.model,
        serving: serving && held !== undefined,
        listed: this.withUnconfirmed(e.record.id, held?.listed ?? [], now),
        running: held?.running ?? [],
        waiting: held?.waiting ?? [],
        slotsFull: held?.slotsFull ?? false,
      };
      for (const a of view.listed) {
        const k = key(view.id, a);
        // First seen listed counts as used: an adapter found loaded (a restart) gets the idle window before it goes.
        if (view.running.includes(a) || view.waiting.includes(a) || !this.lastUsed.has(k)) this.lastUsed.set(k, now);
      }
      out.push(view);
    }
    return out;
  }

  /** What the engine lists, corrected by the agent's recent answers the health poll has not caught up with. */
  private withUnconfirmed(replica: string, listed: readonly string[], now: number): string[] {
    const out = new Set(listed);
    for (const [k, u] of this.unconfirmed) {
      const [r, adapter] = k.split("\u0000") as [string, string];
      if (r !== replica) continue;
      if (u.loaded === out.has(adapter) || now - u.at > ADAPTER_CONFIRM_MS) {
        this.unconfirmed.delete(k);
        continue;
      }
      if (u.loaded) out.add(adapter);
      else out.delete(adapter);
    }
    return [...out];
  }

  /** Plan and start this tick's adapter calls (the leader only). */
  reconcile(models: readonly FleetModelSpec[], entries: ReadonlyMap<string, ReplicaEntry>, now: number): AdapterAction[] {
    if (!this.client.putAdapter || !this.client.deleteAdapter) return [];
    const replicas = this.views(models, entries.values(), now);
    const actions = planAdapters({
      now,
      idleUnloadMs: this.ctx.idleUnloadMs,
      models,
      replicas,
      lastRequestAt: (a) => this.demand?.lastRequestAt(a),
      waitingForLoad: (a) => this.demand?.waitingForLoad(a) ?? 0,
      lastUsed: (r, a) => this.lastUsed.get(key(r, a)),
      inFlight: (r, a) => this.inFlight.has(key(r, a)),
    });
    for (const action of actions) {
      const entry = entries.get(action.replica);
      if (entry) this.perform(action, entry);
    }
    return actions;
  }

  /** Loaded (adapter, replica) pairs per base model, from the last views. */
  loaded(models: readonly FleetModelSpec[], entries: Iterable<ReplicaEntry>): Map<string, number> {
    const out = new Map<string, number>();
    for (const v of this.views(models, entries, this.ctx.now())) out.set(v.model, (out.get(v.model) ?? 0) + v.listed.length);
    return out;
  }

  /** Wait for calls in flight, at most `maxMs`. */
  async settle(maxMs: number): Promise<void> {
    await Promise.race([Promise.allSettled([...this.ops]), Bun.sleep(maxMs)]);
  }

  private count(which: "loads" | "unloads", model: string, result: AdapterCallResult): void {
    let c = this.counts[which].get(model);
    if (!c) this.counts[which].set(model, (c = { ok: 0, failed: 0 }));
    c[result]++;
  }

  private perform(action: AdapterAction, entry: ReplicaEntry): void {
    const agent = this.ctx.agentOf(entry);
    if (!agent) return;
    const k = key(action.replica, action.adapter);
    this.inFlight.add(k);
    const log = { replica: action.replica, model: action.model, adapter: action.adapter, why: action.why };
    const p = (async () => {
      try {
        if (action.kind === "load-adapter") {
          const outcome = await this.client.putAdapter!(agent.address, agent.agentId, action.adapter, action.path);
          this.lastUsed.set(k, this.ctx.now());
          this.unconfirmed.set(k, { loaded: true, at: this.ctx.now() });
          if (outcome === "loaded") this.count("loads", action.model, "ok");
          this.ctx.log.info({ ...log, outcome }, "fleet: adapter loaded");
        } else {
          const outcome = await this.client.deleteAdapter!(agent.address, agent.agentId, action.adapter);
          this.lastUsed.delete(k);
          this.unconfirmed.set(k, { loaded: false, at: this.ctx.now() });
          if (outcome === "unloaded") this.count("unloads", action.model, "ok");
          this.ctx.log.info({ ...log, outcome }, "fleet: adapter unloaded");
        }
      } catch (err) {
        this.count(action.kind === "load-adapter" ? "loads" : "unloads", action.model, "failed");
        this.ctx.log.warn(
          { ...log, err: err instanceof Error ? err.message : String(err) },
          `fleet: adapter ${action.kind === "load-adapter" ? "load" : "unload"} failed`,
        );
      }
    })().finally(() => {
      this.inFlight.delete(k);
      this.ops.delete(p);
      this.ctx.onSettled();
    });
    this.ops.add(p);
  }
}
