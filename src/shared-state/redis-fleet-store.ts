/**
 * The fleet store on Redis: one hash per collection (`<prefix>fleet:<name>`,
 * field = key, value = the record's JSON), the same records and the same
 * read-back checks as the embedded backend (src/control/record-schemas.ts).
 * HSET, HSETNX and HDEL are atomic per record, which is all the contract asks.
 */
import { RECORD_CODECS, type RecordCodec, type RecordTypes, readRecord } from "../control/record-schemas.ts";
import { COLLECTIONS, type Collection, type CollectionName, type FleetStore } from "../control/store.ts";
import type { RedisConnection } from "./redis-connection.ts";

class RedisCollection<T> implements Collection<T> {
  constructor(
    private readonly redis: RedisConnection,
    private readonly key: string,
    private readonly name: CollectionName,
    private readonly codec: RecordCodec<T>,
  ) {}

  private decode(key: string, json: string): T | undefined {
    return readRecord(this.codec, this.name, key, json);
  }

  async list(): Promise<T[]> {
    const flat = (await this.redis.send("HGETALL", [this.key])) as Record<string, string> | string[] | null;
    const entries = flat === null ? [] : Array.isArray(flat) ? pairs(flat) : Object.entries(flat);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return entries.flatMap(([k, json]) => {
      const v = this.decode(k, json);
      return v === undefined ? [] : [v];
    });
  }

  async get(key: string): Promise<T | undefined> {
    const json = (await this.redis.send("HGET", [this.key, key])) as string | null;
    return json === null ? undefined : this.decode(key, json);
  }

  async put(key: string, value: T): Promise<void> {
    await this.redis.send("HSET", [this.key, key, this.codec.encode(value)]);
  }

  async putIfAbsent(key: string, value: T): Promise<boolean> {
    return Number(await this.redis.send("HSETNX", [this.key, key, this.codec.encode(value)])) === 1;
  }

  async delete(key: string): Promise<boolean> {
    return Number(await this.redis.send("HDEL", [this.key, key])) > 0;
  }
}

/** HGETALL answers a map under RESP3 and a flat list under RESP2. */
function pairs(flat: readonly string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i]!, flat[i + 1]!]);
  return out;
}

export class RedisFleetStore implements FleetStore {
  readonly models: Collection<RecordTypes["models"]>;
  readonly cordons: Collection<RecordTypes["cordons"]>;
  readonly drains: Collection<RecordTypes["drains"]>;
  readonly nodes: Collection<RecordTypes["nodes"]>;
  readonly replicas: Collection<RecordTypes["replicas"]>;
  readonly bindings: Collection<RecordTypes["bindings"]>;

  /** `prefix` namespaces the keys (state.key_prefix); the connection is shared and not closed here. */
  constructor(redis: RedisConnection, prefix: string) {
    const c = <K extends CollectionName>(name: K) => new RedisCollection(redis, `${prefix}fleet:${name}`, name, RECORD_CODECS[name]);
    this.models = c("models");
    this.cordons = c("cordons");
    this.drains = c("drains");
    this.nodes = c("nodes");
    this.replicas = c("replicas");
    this.bindings = c("bindings");
  }

  /** The keys this store uses (for tests and operators). */
  static keys(prefix: string): string[] {
    return COLLECTIONS.map((name) => `${prefix}fleet:${name}`);
  }

  async close(): Promise<void> {
    // The connection belongs to the gateway's state backend, which closes it.
  }
}
