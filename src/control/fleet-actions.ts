/**
 * Performs the planner's actions. Gateway calls (the endpoint sink) and store
 * writes happen at once; agent calls run in the background, one replica
 * marked busy meanwhile, and call back when they settle so the next plan
 * sees their outcome. An agent error is kept on the replica and the node.
 */
import type { FleetConfig } from "../config/types.ts";
import type { Logger } from "../shared/logger.ts";
import { AgentCallError, type AgentClient } from "./agent-client.ts";
import type { EndpointSink, ManagedEndpoint } from "./endpoint-sink.ts";
import { FAILED_HISTORY_LIMIT, type FleetState, type ReplicaEntry } from "./fleet-state.ts";
import type { Action } from "./reconcile.ts";
import { buildReplicaRecord, newReplicaId } from "./replica-builder.ts";
import type { FleetStore } from "./store.ts";

interface ActionContext {
  log: Logger;
  now: () => number;
  random: () => number;
  fleet: FleetConfig;
  /** An agent call settled: plan again. */
  onSettled: () => void;
  /** An agent refused this gateway's fencing token: another gateway leads now. */
  onFenced?: () => void;
}

/** How long a deleted agent replica is remembered (longer than any poll takes). */
const GONE_MEMORY_MS = 60_000;

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export class FleetActions {
  private readonly ops = new Set<Promise<void>>();
  private readonly orphans = new Set<string>();
  /** Per model, the last "no room for a drain's replacement" said, so it is logged once, not every round. */
  private readonly unplacedSaid = new Map<string, string>();
  /** Agent replicas this process deleted, and when: an answer requested before that still lists them. */
  private readonly gone = new Map<string, number>();

  constructor(
    private readonly state: FleetState,
    private readonly store: FleetStore,
    private readonly sink: EndpointSink,
    private readonly client: AgentClient,
    private readonly ctx: ActionContext,
  ) {}

  /** A DELETE of this fleet replica is on its way, or done after the answer that lists it was requested. */
  deletedOrDeleting(node: string, agentId: string, requestedAt: number | undefined): boolean {
    const key = `${node}\u0000${agentId}`;
    const goneAt = this.gone.get(key);
    return this.orphans.has(key) || (goneAt !== undefined && (requestedAt === undefined || requestedAt <= goneAt));
  }

  private markGone(node: string, agentId: string): void {
    const now = this.ctx.now();
    this.gone.set(`${node}\u0000${agentId}`, now);
    for (const [key, at] of this.gone) if (now - at > GONE_MEMORY_MS) this.gone.delete(key);
  }

  /** Wait for agent calls in flight, at most `maxMs`. */
  async settle(maxMs: number): Promise<void> {
    await Promise.race([Promise.allSettled([...this.ops]), Bun.sleep(maxMs)]);
  }

  async perform(action: Action, now: number): Promise<void> {
    const entry = "replica" in action ? this.state.replicas.get(action.replica) : undefined;
    switch (action.kind) {
      case "create":
        return this.create(action.model, action.shards, now);
      case "launch":
        return entry && this.launch(entry, action.agentIds);
      case "fail":
        return entry && this.fail(entry, action.reason, now);
      case "stop":
        if (entry && action.short) {
          this.ctx.log.warn(
            { replica: entry.record.id, model: entry.record.model, serving: action.short.serving, desired: action.short.desired },
            "drain grace period over before a replacement served: stopping the original anyway",
          );
        }
        return entry && this.stop(entry, action.reason);
      case "forget":
        return entry && this.forget(entry, action.reason);
      case "mark-draining":
        if (!entry) return;
        entry.record = { ...entry.record, draining: { since: now, reason: action.reason, graceMs: action.graceMs } };
        await this.store.replicas.put(entry.record.id, entry.record);
        this.ctx.log.info({ replica: entry.record.id, model: entry.record.model, reason: action.reason }, "replica leaving");
        return;
      case "add-endpoint":
        return entry && this.handOff(entry, action.draining, now);
      case "remove-endpoint":
        return entry && this.takeBack(entry, "not Ready");
      case "signal-draining":
        if (!entry) return;
        this.sinkCall(() => this.sink.setDraining(entry.record.id, action.draining));
        entry.runtime.drainingSignalled = action.draining;
        return;
      case "delete-orphan":
        return this.deleteOrphan(action.node, action.agentId);
      case "replacement-unplaced": {
        const said = `${action.missing} ${action.reason}`;
        if (this.unplacedSaid.get(action.model) === said) return;
        this.unplacedSaid.set(action.model, said);
        this.ctx.log.warn(
          { model: action.model, missing: action.missing, reason: action.reason },
          "drain: no room for a replacement; the original keeps serving until it is placed or the grace period ends",
        );
        return;
      }
      case "finish-drain": {
        const op = this.state.drains.get(action.node);
        if (op?.state !== "running") return;
        const done = { ...op, state: "done" as const, finishedAt: now };
        this.state.drains.set(op.node, done);
        await this.store.drains.put(op.node, done);
        this.ctx.log.info({ node: op.node, ms: now - op.startedAt }, "drain finished");
        this.unplacedSaid.clear();
        return;
      }
      default: {
        const unreachable: never = action;
        throw new Error(`unknown action ${JSON.stringify(unreachable)}`);
      }
    }
  }

  private sinkCall(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.ctx.log.error({ err }, "endpoint sink call failed");
    }
  }

  private background(fn: () => Promise<void>): void {
    const p = fn()
      .catch((err: unknown) => this.ctx.log.error({ err }, "fleet agent call failed unexpectedly"))
      .finally(() => {
        this.ops.delete(p);
        this.ctx.onSettled();
      });
    this.ops.add(p);
  }

  private address(node: string): { url: string; token: string } {
    const e = this.state.registry.get(node);
    if (!e) throw new AgentCallError("unreachable", `node ${node} is not registered`);
    return { url: e.url, token: e.token };
  }

  private agentError(entry: ReplicaEntry | undefined, node: string, err: unknown): void {
    const message = describe(err);
    if (err instanceof AgentCallError && err.kind === "fenced") {
      // Not the replica's or the node's fault: this gateway's lease is gone.
      this.ctx.log.warn({ node, replica: entry?.record.id, err: message }, "agent refused a stale fencing token: another gateway reconciles now");
      this.ctx.onFenced?.();
      return;
    }
    if (entry) entry.runtime.lastError = message;
    this.state.nodeErrors.set(node, { at: this.ctx.now(), message });
    this.ctx.log.warn({ node, replica: entry?.record.id, err: message }, "agent call failed");
  }

  private async create(model: string, shards: Parameters<typeof buildReplicaRecord>[1], now: number): Promise<void> {
    const spec = this.state.models.get(model)?.spec;
    if (!spec) return;
    const id = newReplicaId(model, this.ctx.random);
    const record = buildReplicaRecord(spec, shards, id, now, (node) => new URL(this.state.registry.get(node)?.url ?? "http://127.0.0.1").hostname);
    // Written before any agent call: a gateway killed right after still knows this replica and adopts it.
    await this.store.replicas.put(id, record);
    const entry = this.state.adoptRecord(record, now);
    this.ctx.log.info({ replica: id, model, shards: shards.map((s) => `${s.node}:${s.gpus.join(",")}`) }, "replica placed");
    this.launch(
      entry,
      record.shards.map((s) => s.agentId),
    );
  }

  private launch(entry: ReplicaEntry, agentIds: readonly string[]): void {
    entry.runtime.busy = true;
    this.background(async () => {
      try {
        await Promise.all(
          entry.record.shards
            .filter((s) => agentIds.includes(s.agentId))
            .map(async (s) => {
              try {
                const res = await this.client.putReplica(this.address(s.node), s.agentId, s.spec);
                entry.runtime.launchedAt[s.agentId] = this.ctx.now();
                entry.runtime.lastError = null;
                this.ctx.log.info({ replica: entry.record.id, node: s.node, outcome: res.outcome }, "replica launched");
              } catch (err) {
                this.agentError(entry, s.node, err);
                if (err instanceof AgentCallError && err.kind === "refused") entry.runtime.failure = `launch refused by ${s.node}: ${err.message}`;
                else if (!(err instanceof AgentCallError && err.kind === "fenced")) entry.runtime.launchFailures++;
              }
            }),
        );
      } finally {
        entry.runtime.busy = false;
      }
    });
  }

  private handOff(entry: ReplicaEntry, draining: boolean, now: number): void {
    const rank0 = entry.verdict.shards[0];
    if (!rank0?.endpoint) return;
    const gpuIds = entry.record.shards.flatMap((s) => {
      const gpus = this.state.registry.get(s.node)?.snapshot?.state?.gpus ?? [];
      return gpus.filter((g) => s.gpus.includes(g.index)).map((g) => g.uuid);
    });
    const endpoint: ManagedEndpoint = {
      id: entry.record.id,
      url: rank0.endpoint,
      pool: entry.record.pool,
      models: [entry.record.model],
      // The sim-engine speaks vLLM's metrics; "auto" lets the poller tell.
      engine: entry.record.engine === "sim" ? "auto" : entry.record.engine,
      node: rank0.node,
      gpuIds,
      // The gateway subscribes to it and indexes what the engine holds, with no configuration.
      ...(rank0.kvEvents ? { kvEvents: rank0.kvEvents } : {}),
      ...(entry.record.shards[0]?.spec.apiKeyEnv !== undefined ? { apiKeyEnv: entry.record.shards[0].spec.apiKeyEnv } : {}),
    };
    this.sinkCall(() => this.sink.addEndpoint(endpoint));
    entry.runtime.handedOff = true;
    if (draining) {
      this.sinkCall(() => this.sink.setDraining(endpoint.id, true));
      entry.runtime.drainingSignalled = true;
    }
    // Only a replica placed after the last failure proves the failures over; an older one says nothing about them.
    const backoff = this.state.backoff.get(entry.record.model);
    if (backoff && entry.record.createdAt > backoff.lastFailureAt) this.state.backoff.delete(entry.record.model);
    this.ctx.log.info(
      { replica: entry.record.id, model: entry.record.model, url: endpoint.url, readyAfterMs: now - entry.record.createdAt },
      "replica ready: in rotation",
    );
  }

  private evict(entry: ReplicaEntry, why: string): void {
    const moved = this.sink.evict?.(entry.record.id) ?? 0;
    if (moved > 0) this.ctx.log.info({ replica: entry.record.id, streams: moved, why }, "open streams moved to other replicas");
  }

  private takeBack(entry: ReplicaEntry, why: string): void {
    if (!entry.runtime.handedOff) return;
    this.sinkCall(() => this.sink.removeEndpoint(entry.record.id));
    entry.runtime.handedOff = false;
    entry.runtime.drainingSignalled = false;
    this.ctx.log.info({ replica: entry.record.id, why }, "replica out of rotation");
  }

  private async fail(entry: ReplicaEntry, reason: string, now: number): Promise<void> {
    const id = entry.record.id;
    if (!this.state.failed.some((f) => f.id === id)) {
      const why = entry.verdict.detail ?? reason;
      entry.runtime.failure ??= why;
      const tail = entry.verdict.shards.find((s) => s.logTail !== null)?.logTail ?? null;
      this.state.failed.unshift({ id, model: entry.record.model, nodes: entry.record.shards.map((s) => s.node), at: now, reason: why, logTail: tail });
      this.state.failed.splice(FAILED_HISTORY_LIMIT);
      const prev = this.state.backoff.get(entry.record.model)?.failures ?? 0;
      const delay = Math.min(this.ctx.fleet.failureBackoffMaxMs, this.ctx.fleet.failureBackoffBaseMs * 2 ** prev);
      this.state.backoff.set(entry.record.model, { failures: prev + 1, lastFailureAt: now, until: now + delay });
      this.ctx.log.warn({ replica: id, model: entry.record.model, reason: why, nextAttemptInMs: delay }, "replica failed: replacing it");
    }
    await this.stop(entry, `failed: ${reason}`);
  }

  private async removeRecord(entry: ReplicaEntry, why: string): Promise<void> {
    // Nothing may stay in the gateway's table once no record knows the replica.
    this.takeBack(entry, why);
    for (const s of entry.record.shards) this.markGone(s.node, s.agentId);
    await this.store.replicas.delete(entry.record.id);
    this.state.replicas.delete(entry.record.id);
    this.ctx.log.info({ replica: entry.record.id, model: entry.record.model, why }, "replica removed");
  }

  private async stop(entry: ReplicaEntry, reason: string): Promise<void> {
    // Streams still open on it (a drain whose grace period is over) go on elsewhere rather than being cut by the stop.
    if (entry.runtime.handedOff) this.sinkCall(() => this.evict(entry, reason));
    this.takeBack(entry, reason);
    entry.runtime.busy = true;
    this.background(async () => {
      const results = await Promise.all(
        entry.record.shards.map(async (s) => {
          try {
            await this.client.deleteReplica(this.address(s.node), s.agentId);
            return true;
          } catch (err) {
            this.agentError(entry, s.node, err);
            return false;
          }
        }),
      );
      entry.runtime.busy = false;
      if (results.every(Boolean)) await this.removeRecord(entry, reason);
    });
  }

  private async forget(entry: ReplicaEntry, reason: string): Promise<void> {
    this.takeBack(entry, reason);
    await this.removeRecord(entry, reason);
  }

  private deleteOrphan(node: string, agentId: string): void {
    const key = `${node}\u0000${agentId}`;
    if (this.orphans.has(key)) return;
    this.orphans.add(key);
    this.ctx.log.warn({ node, replica: agentId }, "stopping a fleet replica no record knows (orphan)");
    this.background(async () => {
      try {
        await this.client.deleteReplica(this.address(node), agentId);
        this.markGone(node, agentId);
      } catch (err) {
        this.agentError(undefined, node, err);
      } finally {
        this.orphans.delete(key);
      }
    });
  }
}
