/** The `state` block (issue 14): sqlite by default, redis with a URL, key-path errors, environment overrides. */
import { describe, expect, test } from "bun:test";
import * as D from "../../src/config/defaults.ts";
import { buildConfig } from "../../src/config/load.ts";
import { issuesOf } from "../helpers/config-issues.ts";

describe("state config", () => {
  test("defaults: the embedded sqlite backend, nothing shared", () => {
    expect(buildConfig({}).state).toEqual({
      backend: "sqlite",
      redisUrl: undefined,
      keyPrefix: D.DEFAULT_STATE_KEY_PREFIX,
      gatewayId: undefined,
      leaseMs: D.DEFAULT_STATE_LEASE_MS,
      syncIntervalMs: D.DEFAULT_STATE_SYNC_INTERVAL_MS,
      quotaAllowance: D.DEFAULT_STATE_QUOTA_ALLOWANCE,
      commandTimeoutMs: D.DEFAULT_STATE_COMMAND_TIMEOUT_MS,
    });
  });

  test("redis with a URL, from the file or the environment", () => {
    expect(buildConfig({ state: { backend: "redis", redis_url: "redis://10.0.0.5:6379/2", gateway_id: "gw-1" } }).state).toMatchObject({
      backend: "redis",
      redisUrl: "redis://10.0.0.5:6379/2",
      gatewayId: "gw-1",
    });
    const env = { LLMGW_STATE__BACKEND: "redis", LLMGW_STATE__REDIS_URL: "rediss://:secret@cache.internal:6380", LLMGW_STATE__LEASE_MS: "3000" };
    expect(buildConfig({}, env).state).toMatchObject({ backend: "redis", redisUrl: "rediss://:secret@cache.internal:6380", leaseMs: 3000 });
  });

  test("with redis, prefix-rendezvous stands in for the gateway's own estimate (for prefix-affinity with no scorers configured, and for precise-prefix where no live event stream says); configured scorers are kept as they are", () => {
    const names = (raw: Record<string, unknown>) => buildConfig(raw).scheduling.scorers.map((s) => `${s.name}:${s.weight}`);
    expect(names({})).toEqual(["queue-depth:2", "kv-cache:1", "inflight:2", "precise-prefix:3", "lora-affinity:6"]);
    expect(buildConfig({}).scheduling.preciseStandIn).toBe("prefix-affinity");
    const redis = { backend: "redis", redis_url: "redis://127.0.0.1:6379" };
    expect(names({ state: redis })).toEqual(["queue-depth:2", "kv-cache:1", "inflight:2", "precise-prefix:3", "lora-affinity:6"]);
    expect(buildConfig({ state: redis }).scheduling.preciseStandIn).toBe("prefix-rendezvous");
    expect(names({ state: redis, scheduling: { scorers: [{ name: "prefix-affinity", weight: 1 }] } })).toEqual(["prefix-affinity:1"]);
    expect(names({ state: redis, scheduling: { scorers: [{ name: "queue-depth", weight: 1 }] } })).toEqual(["queue-depth:1"]);
  });

  test("errors name the key and what was expected", () => {
    expect(issuesOf(() => buildConfig({ state: { backend: "redis" } }))).toEqual([
      "state.redis_url: required when state.backend is redis (e.g. redis://127.0.0.1:6379/0)",
    ]);
    expect(issuesOf(() => buildConfig({ state: { backend: "redis", redis_url: "http://x:6379" } }))).toEqual([
      "state.redis_url: expected a redis:// or rediss:// URL, e.g. redis://127.0.0.1:6379/0",
    ]);
    expect(issuesOf(() => buildConfig({ state: { backend: "memcached" } }))[0]).toStartWith("state.backend:");
    expect(issuesOf(() => buildConfig({ state: { redis_url: "redis://x:1" } }))[0]).toStartWith("state.redis_url: set, but state.backend is sqlite");
    expect(issuesOf(() => buildConfig({ state: { backend: "redis", redis_url: "redis://x:1", lease_ms: 1000, sync_interval_ms: 1000 } }))).toEqual([
      "state.lease_ms: expected at least twice state.sync_interval_ms (1000), so a live leader renews in time",
    ]);
    expect(issuesOf(() => buildConfig({ state: { quota_allowance: 0.9 } }))[0]).toStartWith("state.quota_allowance:");
    expect(issuesOf(() => buildConfig({ state: { extra: 1 } }))[0]).toBe("state.extra: unknown key");
  });
});
