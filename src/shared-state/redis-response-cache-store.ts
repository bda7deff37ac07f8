/**
 * Response-cache entries on Redis, shared by every gateway: one string per
 * key (status, headers, body in base64, expiry), expired by Redis. A cache is
 * an optimisation: while Redis is unreachable a lookup is a miss and a store
 * is skipped, never a failed request. Memory is bounded by Redis's own
 * `maxmemory` policy (allkeys-lru suits a cache), not by response_cache.max_bytes.
 */
import type { ResponseCacheStore } from "../cache/response-cache-store.ts";
import type { RecordedResponse } from "../shared/recorded-response.ts";
import type { RedisConnection } from "./redis-connection.ts";
import { expiryTtlMs } from "./redis-ttl.ts";

/** Entries outlive their ttl in Redis by at most this (llmgw checks the expiry itself). */
const CACHE_SLACK_MS = 60_000;

interface Entry {
  s: number;
  h: [string, string][];
  b: string;
  e: number;
}

export class RedisResponseCacheStore implements ResponseCacheStore {
  readonly #r: RedisConnection;
  readonly #p: string;
  /** Lookups and stores skipped because Redis was unreachable. */
  unavailable = 0;

  constructor(redis: RedisConnection, prefix: string) {
    this.#r = redis;
    this.#p = `${prefix}cache:`;
  }

  async get(key: string, nowMs: number): Promise<RecordedResponse | undefined> {
    let json: unknown;
    try {
      json = await this.#r.send("GET", [this.#p + key]);
    } catch {
      this.unavailable++;
      return undefined;
    }
    if (typeof json !== "string") return undefined;
    const e = JSON.parse(json) as Entry;
    if (e.e <= nowMs) return undefined;
    return { status: e.s, headers: e.h, body: new Uint8Array(Buffer.from(e.b, "base64")) };
  }

  async set(key: string, value: RecordedResponse, expiresAtMs: number): Promise<void> {
    const body = Buffer.from(value.body.buffer, value.body.byteOffset, value.body.byteLength).toString("base64");
    const entry: Entry = { s: value.status, h: value.headers, b: body, e: expiresAtMs };
    try {
      await this.#r.send("SET", [this.#p + key, JSON.stringify(entry), "PX", String(expiryTtlMs(expiresAtMs - Date.now(), CACHE_SLACK_MS))]);
    } catch {
      this.unavailable++;
    }
  }
}
