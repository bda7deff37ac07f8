/**
 * Where a gateway's shared state lives, chosen by `state.backend`: the
 * embedded default (bun:sqlite files in data_dir and an in-process response
 * cache; one gateway per data_dir) or Redis (several gateways, one state).
 * Each store is opened on first use, so a gateway that never runs a fleet or
 * batches writes nothing.
 */
import { resolve } from "node:path";
import type { Database } from "bun:sqlite";
import { MemoryResponseCacheStore, type ResponseCacheStore } from "../cache/response-cache.ts";
import { ConfigError } from "../config/load.ts";
import type { Config } from "../config/types.ts";
import { SqliteFleetStore } from "../control/sqlite-store.ts";
import type { FleetStore } from "../control/store.ts";
import { SqliteIdempotencyStore, type IdempotencyStore } from "../jobs/idempotency-store.ts";
import type { JobsStore } from "../jobs/jobs-store.ts";
import { SqliteJobsStore } from "../jobs/sqlite-jobs-store.ts";
import { openStateDatabase } from "../jobs/state-db.ts";
import { RedisConnection } from "./redis-connection.ts";
import { RedisFleetStore } from "./redis-fleet-store.ts";
import { RedisIdempotencyStore } from "./redis-idempotency-store.ts";
import { RedisJobsStore } from "./redis-jobs-store.ts";
import { RedisResponseCacheStore } from "./redis-response-cache-store.ts";

export interface StateBackend {
  readonly kind: "sqlite" | "redis";
  /**
   * Shared by several gateways: a line or key held by a gateway that died is
   * freed by its lease, not by a reclaim at start (which would steal what a
   * live gateway runs).
   */
  readonly shared: boolean;
  /** The Redis connection of a shared backend (status, command counts). */
  readonly redis: RedisConnection | undefined;
  fleetStore(): FleetStore;
  jobsStore(): JobsStore;
  idempotencyStore(): IdempotencyStore;
  responseCacheStore(): ResponseCacheStore;
  close(): Promise<void>;
}

function once<T>(open: () => T): () => T {
  let value: T | undefined;
  return () => (value ??= open());
}

function embedded(config: Config): StateBackend {
  const db = once((): Database => openStateDatabase(config.dataDir));
  const fleet = once(() => new SqliteFleetStore(config.dataDir));
  const jobs = once(() => new SqliteJobsStore(db()));
  const idempotency = once(() => new SqliteIdempotencyStore(db()));
  const cache = once(() => new MemoryResponseCacheStore(config.responseCache.maxBytes));
  let opened: { db: boolean; fleet: boolean } = { db: false, fleet: false };
  return {
    kind: "sqlite",
    shared: false,
    redis: undefined,
    fleetStore: () => ((opened.fleet = true), fleet()),
    jobsStore: () => ((opened.db = true), jobs()),
    idempotencyStore: () => ((opened.db = true), idempotency()),
    responseCacheStore: cache,
    async close() {
      if (opened.fleet) await fleet().close();
      if (opened.db) db().close();
      opened = { db: false, fleet: false };
    },
  };
}

/**
 * Open the configured backend. With Redis, the first connection must
 * succeed (a ConfigError naming state.redis_url otherwise): a gateway that
 * has never seen the shared state cannot serve it. Later outages are
 * survived (fail static).
 */
export async function openStateBackend(config: Config): Promise<StateBackend> {
  const s = config.state;
  if (s.backend === "sqlite" || s.redisUrl === undefined) return embedded(config);
  const redis = new RedisConnection(s.redisUrl, { commandTimeoutMs: s.commandTimeoutMs });
  if (!(await redis.connect())) {
    const why = redis.lastError ?? "no answer";
    redis.close();
    throw new ConfigError("state", [`state.redis_url: cannot reach Redis at ${redis.target} (${why})`]);
  }
  const p = s.keyPrefix;
  const fleet = once(() => new RedisFleetStore(redis, p));
  const jobs = once(() => new RedisJobsStore(redis, p));
  const idempotency = once(() => new RedisIdempotencyStore(redis, p));
  const cache = once(() => new RedisResponseCacheStore(redis, p));
  return {
    kind: "redis",
    shared: true,
    redis,
    fleetStore: fleet,
    jobsStore: jobs,
    idempotencyStore: idempotency,
    responseCacheStore: cache,
    async close() {
      redis.close();
    },
  };
}

/** Where the state is, for logs and --check-config. */
export function describeState(config: Config): string {
  const s = config.state;
  if (s.backend === "redis" && s.redisUrl !== undefined) {
    const u = new URL(s.redisUrl);
    return `state shared through Redis at ${u.protocol}//${u.host}${u.pathname} (prefix ${s.keyPrefix})`;
  }
  return `state embedded in ${resolve(config.dataDir)}`;
}
