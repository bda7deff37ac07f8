/** The store contracts (fleet, jobs, idempotency, response cache, responses, live keys) against a real redis-server: the same suites the embedded backend passes. */
import { afterAll, beforeAll } from "bun:test";
import type { JobsStore } from "../../src/jobs/jobs-store.ts";
import type { KeyStore } from "../../src/keys/key-store.ts";
import { RedisConnection } from "../../src/shared-state/redis-connection.ts";
import { RedisFleetStore } from "../../src/shared-state/redis-fleet-store.ts";
import { RedisIdempotencyStore } from "../../src/shared-state/redis-idempotency-store.ts";
import { RedisJobsStore } from "../../src/shared-state/redis-jobs-store.ts";
import { RedisKeyStore } from "../../src/shared-state/redis-key-store.ts";
import { RedisResponseCacheStore } from "../../src/shared-state/redis-response-cache-store.ts";
import { RedisResponsesStore } from "../../src/shared-state/redis-responses-store.ts";
import { fleetStoreContract } from "../helpers/fleet-store-contract.ts";
import { idempotencyStoreContract } from "../helpers/idempotency-store-contract.ts";
import { jobsStoreContract } from "../helpers/jobs-store-contract.ts";
import { keyStoreContract } from "../helpers/key-store-contract.ts";
import { describeWithRedis, startRedisServer, stopRedisServers } from "../helpers/redis-server.ts";
import { responseCacheStoreContract } from "../helpers/response-cache-store-contract.ts";
import { responsesStoreContract } from "../helpers/responses-store-contract.ts";

let redis: RedisConnection;
let n = 0;
/** Each store gets its own key prefix: a fresh, empty namespace on the one server. */
const freshPrefix = () => `t${n++}:`;

describeWithRedis("state stores on redis", () => {
  beforeAll(async () => {
    const server = await startRedisServer();
    redis = new RedisConnection(server.url, { commandTimeoutMs: 2_000 });
    if (!(await redis.connect())) throw new Error("redis did not answer");
  });
  afterAll(async () => {
    redis?.close();
    await stopRedisServers();
  });

  fleetStoreContract("redis", freshPrefix, (prefix) => new RedisFleetStore(redis, prefix));
  const prefixes = new Map<JobsStore, string>();
  jobsStoreContract(
    "redis",
    () => {
      const prefix = freshPrefix();
      const s = new RedisJobsStore(redis, prefix);
      prefixes.set(s, prefix);
      return s;
    },
    async (s, id) => void (await redis.send("HSET", [`${prefixes.get(s)}jobs:batch:${id}`, "doc", "{not json"])),
  );
  idempotencyStoreContract("redis", () => new RedisIdempotencyStore(redis, freshPrefix()));
  responseCacheStoreContract("redis", () => new RedisResponseCacheStore(redis, freshPrefix()));
  responsesStoreContract("redis", () => new RedisResponsesStore(redis, freshPrefix()));
  const keyPrefixes = new Map<KeyStore, string>();
  keyStoreContract(
    "redis",
    () => {
      const prefix = freshPrefix();
      const s = new RedisKeyStore(redis, prefix);
      keyPrefixes.set(s, prefix);
      return s;
    },
    async (s, id) => void (await redis.send("HSET", [`${keyPrefixes.get(s)}keys`, id, "{not json"])),
  );
});
