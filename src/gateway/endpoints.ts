/**
 * The endpoints the gateway routes to, owned by the main thread: which slot
 * of the shared table each occupies, its pool, URL and models. Endpoints come
 * from the config at start and from the fleet manager at run time; adding,
 * draining and removing one updates the table, the model catalog and both
 * workers. A removed endpoint's slot is reused only once every request still
 * holding it has let go, so a late release never lands on a newcomer.
 */

import type { EngineFlavor } from "../config/types.ts";
import type { PolledEndpoint } from "../protocol/health-messages.ts";
import type { KvEventsSource } from "../protocol/kv-events-messages.ts";
import type { EndpointDescriptor } from "../protocol/scheduler-messages.ts";
import { type EndpointTable, I, SLOT_ACTIVE, SLOT_FREE, SLOT_RETIRING } from "../shared/endpoint-table.ts";
import type { CircuitBreakers } from "./circuit-breaker.ts";
import type { DialGuard } from "./dial-guard.ts";
import type { ModelCatalog } from "./model-catalog.ts";
import { StreamEvictions } from "./stream-evictions.ts";

export interface EndpointSpec {
  id: string;
  url: string;
  pool: string;
  /** undefined: discovered from the endpoint's /v1/models. */
  models: readonly string[] | undefined;
  /** The configured models are authoritative: ready on /health alone, whatever /v1/models lists. */
  modelsSource?: "listed" | "static";
  engine: EngineFlavor;
  gpuIds: readonly string[];
  dcgmUrl: string | undefined;
  /** The node it runs on, for a fleet replica (undefined for a static endpoint). */
  node?: string | undefined;
  /** Where its engine publishes KV-cache events (config `kv_events`, or the replica's report); absent: none. */
  kvEvents?: KvEventsSource | undefined;
  /** Sent with every request to its engine (its API key as `authorization`, configured headers); a secret, never logged. */
  upstreamHeaders?: Readonly<Record<string, string>> | undefined;
}

/** An endpoint without credentials sends none. */
const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/** Who must hear of a change (the two workers' clients); attached once they exist. */
export interface EndpointListeners {
  setEndpoint(index: number, d: EndpointDescriptor | undefined): void;
  setModels(index: number, models: string[]): void;
  pollEndpoint(index: number, e: PolledEndpoint | undefined): void;
  /** Follow the KV-cache events of the endpoint in a slot (undefined: it publishes none, or left). */
  followKvEvents?(index: number, id: string, source: KvEventsSource | undefined): void;
}

/** Pools the shared pool table has rows for. */
export const MAX_POOLS = 64;

export class EndpointRegistry {
  private readonly specs = new Map<number, EndpointSpec>();
  /** Removed endpoints whose slot is not free yet: a request still holding one may still need its URL and id. */
  private readonly retiring = new Map<number, EndpointSpec>();
  private readonly slotById = new Map<string, number>();
  private readonly poolRows = new Map<string, number>();
  /** Freed slots, oldest first: reused last, so a stale write from a worker that has not yet heard of the removal lands nowhere live. */
  private readonly free: number[] = [];
  private nextUnused = 0;
  private listeners: EndpointListeners | undefined;
  /** Continuable streams open on each slot: evict() moves them elsewhere. */
  readonly evictions = new StreamEvictions();

  constructor(
    readonly table: EndpointTable,
    private readonly catalog: ModelCatalog,
    readonly dial: DialGuard,
    private readonly breakers: CircuitBreakers,
  ) {}

  attach(listeners: EndpointListeners): void {
    this.listeners = listeners;
  }

  /** Start routing to an endpoint (an id already present is replaced); returns its slot. */
  add(spec: EndpointSpec): number {
    if (this.slotById.has(spec.id)) this.remove(spec.id);
    const index = this.takeSlot();
    const pool = this.poolRow(spec.pool);
    this.table.resetRow(index);
    this.table.setInt(index, I.POOL, pool);
    this.table.setInt(index, I.SLOT, SLOT_ACTIVE);
    this.breakers.reset(index);
    this.dial.setTarget(index, spec.url);
    this.catalog.addEndpoint(index, spec.models);
    this.specs.set(index, spec);
    this.slotById.set(spec.id, index);
    this.listeners?.setEndpoint(index, this.descriptor(index));
    this.listeners?.pollEndpoint(index, this.polled(index));
    if (spec.kvEvents) this.listeners?.followKvEvents?.(index, spec.id, spec.kvEvents);
    return index;
  }

  /** Stop routing to an endpoint; requests still open on it finish and let go normally. */
  remove(id: string): void {
    const index = this.slotById.get(id);
    if (index === undefined) return;
    this.slotById.delete(id);
    this.retiring.set(index, this.specs.get(index)!);
    this.specs.delete(index);
    this.catalog.removeEndpoint(index);
    this.table.setInt(index, I.SLOT, SLOT_RETIRING);
    this.listeners?.setEndpoint(index, undefined);
    this.listeners?.pollEndpoint(index, undefined);
    this.listeners?.followKvEvents?.(index, id, undefined);
    this.sweep();
  }

  /** Draining: no new requests; open streams finish. */
  setDraining(id: string, draining: boolean): void {
    const index = this.slotById.get(id);
    if (index !== undefined) this.table.setInt(index, I.DRAINING, draining ? 1 : 0);
  }

  /**
   * The endpoint is going away now (a drain past its grace period, a replica
   * being stopped): its open streams that can be continued move to another
   * replica at once instead of being cut. Returns how many were moved.
   */
  evict(id: string): number {
    const index = this.slotById.get(id);
    return index === undefined ? 0 : this.evictions.evict(index);
  }

  /** The slot an endpoint occupies (undefined: unknown or removed). */
  slotOf(id: string): number | undefined {
    return this.slotById.get(id);
  }

  /** Requests holding the endpoint now; 0 for an unknown id. */
  inflight(id: string): number {
    const index = this.slotById.get(id);
    return index === undefined ? 0 : this.table.getInt(index, I.INFLIGHT);
  }

  /** Discovery found an endpoint's models. */
  modelsDiscovered(index: number, models: string[]): boolean {
    if (!this.specs.has(index) || !this.catalog.setDiscovered(index, models)) return false;
    this.breakers.resetModels(index);
    this.listeners?.setModels(index, models);
    return true;
  }

  /** Also for a removed endpoint whose slot is still held: a grant made just before the removal still reaches its engine. */
  idOf(index: number): string | undefined {
    return (this.specs.get(index) ?? this.retiring.get(index))?.id;
  }

  urlOf(index: number): string | undefined {
    return (this.specs.get(index) ?? this.retiring.get(index))?.url;
  }

  /** The headers every request to the engine in a slot carries (a retiring one's too, as urlOf). */
  upstreamHeadersOf(index: number): Readonly<Record<string, string>> {
    return (this.specs.get(index) ?? this.retiring.get(index))?.upstreamHeaders ?? NO_HEADERS;
  }

  specOf(index: number): EndpointSpec | undefined {
    return this.specs.get(index);
  }

  /** Live endpoints (slot and spec), in slot order. */
  active(): { index: number; id: string; spec: EndpointSpec }[] {
    return [...this.specs].sort((a, b) => a[0] - b[0]).map(([index, spec]) => ({ index, id: spec.id, spec }));
  }

  /** Pools with a row (index and name). */
  pools(): { index: number; name: string }[] {
    return [...this.poolRows].map(([name, index]) => ({ index, name }));
  }

  /** The name of the pool in a row (undefined: no such row). */
  poolName(row: number): string | undefined {
    for (const [name, index] of this.poolRows) if (index === row) return name;
    return undefined;
  }

  descriptor(index: number): EndpointDescriptor | undefined {
    const spec = this.specs.get(index);
    if (!spec) return undefined;
    return { index, id: spec.id, pool: this.poolRow(spec.pool), poolName: spec.pool, models: [...this.catalog.modelsOf(index)] };
  }

  polled(index: number): PolledEndpoint | undefined {
    const spec = this.specs.get(index);
    if (!spec) return undefined;
    return {
      index,
      id: spec.id,
      url: spec.url,
      engine: spec.engine,
      models: spec.models ? [...spec.models] : undefined,
      staticModels: spec.modelsSource === "static",
      gpuIds: [...spec.gpuIds],
      dcgmUrl: spec.dcgmUrl,
      pool: spec.pool,
      poolRow: this.poolRow(spec.pool),
      ...(spec.upstreamHeaders ? { headers: { ...spec.upstreamHeaders } } : {}),
    };
  }

  /** Free the slots of removed endpoints nothing holds any more. */
  sweep(): void {
    for (let i = 0; i < this.nextUnused; i++) {
      if (this.table.getInt(i, I.SLOT) === SLOT_RETIRING && this.table.getInt(i, I.INFLIGHT) === 0) {
        this.table.setInt(i, I.SLOT, SLOT_FREE);
        this.retiring.delete(i);
        this.free.push(i);
      }
    }
  }

  private takeSlot(): number {
    if (this.nextUnused < this.table.rows) return this.nextUnused++;
    this.sweep();
    const slot = this.free.shift();
    if (slot === undefined) throw new RangeError(`no free endpoint slot: all ${this.table.rows} are in use (raise max_endpoints)`);
    return slot;
  }

  private poolRow(name: string): number {
    let row = this.poolRows.get(name);
    if (row === undefined) {
      if (this.poolRows.size >= MAX_POOLS) throw new RangeError(`at most ${MAX_POOLS} pools`);
      row = this.poolRows.size;
      this.poolRows.set(name, row);
    }
    return row;
  }
}
