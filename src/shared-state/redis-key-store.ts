/**
 * Live API keys on Redis, shared by every gateway: one hash of records
 * (`<prefix>keys`: id → JSON), a version counter every write moves
 * (`<prefix>keys:version`, which gateways poll once a second, as the demand
 * exchange polls its hash), and per-key usage hashes (`<prefix>keys:usage:<id>`)
 * that each gateway adds its counts to.
 */
import { type KeyStore, parseRecord, type UsageDelta } from "../keys/key-store.ts";
import { type KeyUsage, type LiveKeyRecord, NO_USAGE } from "../keys/live-key.ts";
import { type RedisConnection, RedisScript } from "./redis-connection.ts";

/** KEYS: records hash, version. ARGV: id, JSON. The record and the version move together. */
const PUT = new RedisScript(
  "keys-put",
  `redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return redis.call('INCR', KEYS[2])`,
);

/** KEYS: one usage hash per key. ARGV: per key, requests, tokens in, tokens out, last used (ms). */
const ADD_USAGE = new RedisScript(
  "keys-add-usage",
  `for i = 1, #KEYS do
  local a = (i - 1) * 4
  redis.call('HINCRBY', KEYS[i], 'requests', ARGV[a + 1])
  redis.call('HINCRBY', KEYS[i], 'tokens_in', ARGV[a + 2])
  redis.call('HINCRBY', KEYS[i], 'tokens_out', ARGV[a + 3])
  local last = tonumber(redis.call('HGET', KEYS[i], 'last_used_ms') or '0')
  if tonumber(ARGV[a + 4]) > last then redis.call('HSET', KEYS[i], 'last_used_ms', ARGV[a + 4]) end
end
return #KEYS`,
);

export class RedisKeyStore implements KeyStore {
  readonly #r: RedisConnection;
  readonly #records: string;
  readonly #version: string;
  readonly #usage: string;

  /** `prefix` namespaces the keys (state.key_prefix); the connection is shared and not closed here. */
  constructor(redis: RedisConnection, prefix: string) {
    this.#r = redis;
    this.#records = `${prefix}keys`;
    this.#version = `${prefix}keys:version`;
    this.#usage = `${prefix}keys:usage:`;
  }

  async version(): Promise<number> {
    return Number((await this.#r.send("GET", [this.#version])) ?? 0);
  }

  async list(): Promise<LiveKeyRecord[]> {
    const docs = (await this.#r.send("HVALS", [this.#records])) as string[] | null;
    return (docs ?? []).flatMap((doc, i) => parseRecord(doc, `${this.#records}[${i}]`) ?? []).sort((a, b) => (a.id < b.id ? -1 : 1));
  }

  async get(id: string): Promise<LiveKeyRecord | undefined> {
    const doc = (await this.#r.send("HGET", [this.#records, id])) as string | null;
    return doc === null ? undefined : parseRecord(doc, id);
  }

  async put(record: LiveKeyRecord): Promise<void> {
    await this.#r.eval(PUT, [this.#records, this.#version], [record.id, JSON.stringify(record)]);
  }

  async addUsage(deltas: ReadonlyMap<string, UsageDelta>): Promise<void> {
    if (deltas.size === 0) return;
    const keys: string[] = [];
    const args: number[] = [];
    for (const [id, d] of deltas) {
      keys.push(this.#usage + id);
      args.push(d.requests, d.tokensIn, d.tokensOut, d.lastUsedMs);
    }
    await this.#r.eval(ADD_USAGE, keys, args);
  }

  async usage(ids: readonly string[]): Promise<Map<string, KeyUsage>> {
    const out = new Map<string, KeyUsage>();
    const answers = await Promise.all(
      ids.map((id) => this.#r.send("HMGET", [this.#usage + id, "requests", "tokens_in", "tokens_out", "last_used_ms"]) as Promise<(string | null)[]>),
    );
    ids.forEach((id, i) => {
      const [requests, tokensIn, tokensOut, last] = answers[i]!;
      out.set(
        id,
        requests === null
          ? NO_USAGE
          : {
              requests: Number(requests),
              tokens_in: Number(tokensIn ?? 0),
              tokens_out: Number(tokensOut ?? 0),
              last_used_ms: last === null ? null : Number(last),
            },
      );
    });
    return out;
  }
}
