/**
 * Where a gateway's shared state lives, chosen by `state.backend`. The
 * embedded default needs nothing here: the fleet manager and the jobs service
 * open their bun:sqlite files in data_dir on first use, and the response
 * cache lives in the process, exactly as with one gateway. With Redis this
 * opens one connection and the stores on it that every gateway shares.
 */
import { resolve } from "node:path";
import type { ResponseCacheStore } from "../cache/response-cache-store.ts";
import { ConfigError } from "../config/load.ts";
import type { Config } from "../config/types.ts";
import type { FleetStore } from "../control/store.ts";
import type { IdempotencyStore } from "../jobs/idempotency-store.ts";
import type { JobsStore } from "../jobs/jobs-store.ts";
import type { ResponsesStore } from "../jobs/responses-store.ts";
import type { KeyStore } from "../keys/key-store.ts";
import { RedisConnection } from "./redis-connection.ts";
import { RedisFleetStore } from "./redis-fleet-store.ts";
import { RedisIdempotencyStore } from "./redis-idempotency-store.ts";
import { RedisJobsStore } from "./redis-jobs-store.ts";
import { RedisKeyStore } from "./redis-key-store.ts";
import { RedisResponseCacheStore } from "./redis-response-cache-store.ts";
import { RedisResponsesStore } from "./redis-responses-store.ts";

/**
 * Stores shared by several gateways. A line or key held by a gateway that
 * died is freed by its lease, never by a reclaim at start (which would take
 * what a live gateway runs).
 */
interface SharedStores {
  fleet: FleetStore;
  jobs: JobsStore;
  idempotency: IdempotencyStore;
  responseCache: ResponseCacheStore;
  /** The Responses API's stored responses (conversation state, background responses). */
  responses: ResponsesStore;
  /** Live API keys and their usage. */
  keys: KeyStore;
}

export interface StateBackend {
  readonly kind: "sqlite" | "redis";
  /** The Redis connection (status, command counts); undefined when embedded. */
  readonly redis: RedisConnection | undefined;
  /** The shared stores; undefined when embedded (each part opens its own files). */
  readonly shared: SharedStores | undefined;
  close(): Promise<void>;
}

const EMBEDDED: StateBackend = Object.freeze({ kind: "sqlite" as const, redis: undefined, shared: undefined, close: async () => {} });

/**
 * Open the configured backend. With Redis, the first connection must
 * succeed (a ConfigError naming state.redis_url otherwise): a gateway that
 * has never seen the shared state cannot serve it. Later outages are
 * survived (fail static).
 */
export async function openStateBackend(config: Config): Promise<StateBackend> {
  const s = config.state;
  if (s.backend === "sqlite" || s.redisUrl === undefined) return EMBEDDED;
  const redis = new RedisConnection(s.redisUrl, { commandTimeoutMs: s.commandTimeoutMs });
  if (!(await redis.connect())) {
    const why = redis.lastError ?? "no answer";
    redis.close();
    throw new ConfigError("state", [`state.redis_url: cannot reach Redis at ${redis.target} (${why})`]);
  }
  const p = s.keyPrefix;
  return {
    kind: "redis",
    redis,
    shared: {
      fleet: new RedisFleetStore(redis, p),
      jobs: new RedisJobsStore(redis, p),
      idempotency: new RedisIdempotencyStore(redis, p),
      responseCache: new RedisResponseCacheStore(redis, p),
      responses: new RedisResponsesStore(redis, p),
      keys: new RedisKeyStore(redis, p),
    },
    async close() {
      redis.close();
    },
  };
}

/** Where the state is, for --check-config. */
export function describeState(config: Config): string {
  const s = config.state;
  if (s.backend === "redis" && s.redisUrl !== undefined) {
    const u = new URL(s.redisUrl);
    return `state shared through Redis at ${u.protocol}//${u.host}${u.pathname} (prefix ${s.keyPrefix})`;
  }
  return `state embedded in ${resolve(config.dataDir)}`;
}
