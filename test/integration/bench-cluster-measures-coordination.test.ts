/** `llmgw bench cluster` in small: every setup serves without an error, CPU per request is measured for each gateway, Redis is asked far less than once per request, and the shared quota is never exceeded. */
import { expect } from "bun:test";
import { runClusterBench } from "../../src/bench/cluster-scenario.ts";
import { testWithTool } from "../helpers/system-tools.ts";

testWithTool(
  "redis-server",
  "1 vs 3 embedded vs 3 Redis gateways: no error, CPU per request of each gateway, < 0.1 Redis commands per request, the quota held",
  async () => {
    const r = await runClusterBench({ clients: 9, holdMs: 2_000, rounds: 1, maxTokens: 8, quotaMs: 2_000, quotaRpm: 600, minRequests: 60 });
    expect(r.setups.map((s) => [s.setup, s.gateways, s.errors])).toEqual([
      ["1 gateway", 1, 0],
      ["3 gateways, embedded", 3, 0],
      ["3 gateways, redis", 3, 0],
    ]);
    for (const s of r.setups) {
      expect(s.requests).toBeGreaterThan(50);
      expect(s.cpu_us_per_request_each).toHaveLength(s.gateways);
      for (const us of s.cpu_us_per_request_each) expect(us).toBeGreaterThan(0);
      expect(s.idle_cpu_ms_per_s).toBeGreaterThan(0);
    }
    expect(Number.isFinite(r.coordination_overhead)).toBe(true);
    // Per request, net of what the gateways send idle: the raw figure divides a
    // fixed background by however many requests a busy or cold host let through.
    expect(r.setups[2]!.redis_commands_per_request).toBeLessThan(0.1);
    expect(r.setups[2]!.redis_commands_per_request_raw).toBeGreaterThanOrEqual(r.setups[2]!.redis_commands_per_request!);
    // Leases, demand exchange and quota sync: a few commands a second per gateway, not a flood.
    expect(r.setups[2]!.redis_background_commands_per_s).toBeGreaterThan(0);
    expect(r.setups[2]!.redis_background_commands_per_s).toBeLessThan(100);
    expect(r.setups[0]!.redis_commands_per_request).toBeNull();
    expect(r.quota.admitted).toBeLessThanOrEqual(r.quota.allowed + 1);
    // Not under-admitting, where the hammer offered more than the bucket allows
    // (a busy host may not: then everything offered must have been admitted).
    const offered = r.quota.admitted + r.quota.refused;
    expect(r.quota.admitted).toBeGreaterThan(Math.min(r.quota.allowed, offered) * 0.9);
  },
  120_000,
);
