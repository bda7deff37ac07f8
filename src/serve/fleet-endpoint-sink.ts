/**
 * The fleet manager's EndpointSink over the gateway's EndpointRegistry: a
 * Ready replica becomes an endpoint (its model list configured, so the
 * catalog serves the model at once), draining and removal go straight to the
 * registry, and "ready" is the gateway's own health poll (the table's READY
 * flag), so a drain counts a replacement as serving only once this gateway
 * routes to it.
 */
import type { ReplicaLoad } from "../control/autoscale/signals.ts";
import type { EndpointAdapters, EndpointSink, ManagedEndpoint } from "../control/endpoint-sink.ts";
import type { EndpointRegistry, EndpointSpec } from "../gateway/endpoints.ts";
import { F, I } from "../shared/endpoint-table.ts";

/** The registry's form of a replica's endpoint; `dcgmUrl`: its node's exporter, so GPU faults take it out of rotation. */
function managedEndpointSpec(e: ManagedEndpoint, dcgmUrl: string | undefined, env: Readonly<Record<string, string | undefined>>): EndpointSpec {
  // Unset here (checked when the model was set): sent without, the engine's 401 names the setting.
  const key = e.apiKeyEnv === undefined ? undefined : env[e.apiKeyEnv]?.trim();
  return {
    id: e.id,
    url: e.url,
    pool: e.pool,
    models: [...e.models],
    engine: e.engine,
    gpuIds: [...e.gpuIds],
    dcgmUrl,
    node: e.node,
    ...(e.kvEvents ? { kvEvents: { ...e.kvEvents } } : {}),
    ...(key ? { upstreamHeaders: { authorization: `Bearer ${key}` } } : {}),
  };
}

function sameSpec(a: EndpointSpec, b: EndpointSpec): boolean {
  const same = (x: readonly string[] | undefined, y: readonly string[] | undefined) =>
    x === y || (x !== undefined && y !== undefined && x.length === y.length && x.every((v, i) => v === y[i]));
  const kv = (x: EndpointSpec) => (x.kvEvents ? `${x.kvEvents.endpoint} ${x.kvEvents.replayEndpoint} ${x.kvEvents.topic}` : "");
  return (
    a.url === b.url &&
    a.pool === b.pool &&
    a.engine === b.engine &&
    a.dcgmUrl === b.dcgmUrl &&
    a.node === b.node &&
    same(a.models, b.models) &&
    same(a.gpuIds, b.gpuIds) &&
    kv(a) === kv(b) &&
    a.upstreamHeaders?.authorization === b.upstreamHeaders?.authorization
  );
}

export class RegistryEndpointSink implements EndpointSink {
  constructor(
    private readonly registry: EndpointRegistry,
    /** The dcgm-exporter of a node, when it has one (the fleet's node registry). */
    private readonly dcgmUrlOf: (node: string) => string | undefined = () => undefined,
    /** An endpoint slot's LoRA adapters as the health poll saw them (absent: the fleet loads none). */
    private readonly adaptersOf?: (slot: number) => EndpointAdapters | undefined,
    /** Where a replica's api_key_env is read. */
    private readonly env: Readonly<Record<string, string | undefined>> = process.env,
  ) {}

  adapters(id: string): EndpointAdapters | undefined {
    const slot = this.registry.slotOf(id);
    return slot === undefined ? undefined : this.adaptersOf?.(slot);
  }

  /**
   * Idempotent by id: the same endpoint again changes nothing (its slot, its
   * health and in-flight count stay). A changed one (the agent moved the
   * engine to another URL) takes a new slot; requests open on the old one
   * finish there, and a draining mark carries over.
   */
  addEndpoint(e: ManagedEndpoint): void {
    const spec = managedEndpointSpec(e, this.dcgmUrlOf(e.node), this.env);
    const slot = this.registry.slotOf(e.id);
    const current = slot === undefined ? undefined : this.registry.specOf(slot);
    if (current && sameSpec(current, spec)) return;
    const draining = slot !== undefined && this.registry.table.getInt(slot, I.DRAINING) === 1;
    this.registry.add(spec);
    if (draining) this.registry.setDraining(e.id, true);
  }

  setDraining(id: string, draining: boolean): void {
    this.registry.setDraining(id, draining);
  }

  inflight(id: string): number {
    return this.registry.inflight(id);
  }

  removeEndpoint(id: string): void {
    this.registry.remove(id);
  }

  /** The replica is being stopped: its continuable streams move to another replica now. */
  evict(id: string): number {
    return this.registry.evict(id);
  }

  /** Running and waiting sequences and KV usage from the engine's last poll (undefined: none reported yet). */
  load(id: string): ReplicaLoad | undefined {
    const slot = this.registry.slotOf(id);
    if (slot === undefined) return undefined;
    const t = this.registry.table;
    const running = t.getInt(slot, I.RUNNING);
    if (running < 0) return undefined;
    return { running, waiting: Math.max(0, t.getInt(slot, I.WAITING)), kvUsage: t.getFloat(slot, F.KV_USAGE) };
  }

  /** The gateway's health poll found it up with its model loaded. */
  ready(id: string): boolean {
    const slot = this.registry.slotOf(id);
    return slot !== undefined && this.registry.table.getInt(slot, I.READY) === 1;
  }
}
