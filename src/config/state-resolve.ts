/** The `state` block's cross-field checks and its validated form, and the scorers a Redis backend implies (the wire schema is state-config.ts). */
import type { ParsedConfig } from "./schema.ts";
import type { StateConfig } from "./types.ts";

export function stateCrossFieldIssues(c: ParsedConfig): string[] {
  const s = c.state;
  const issues: string[] = [];
  if (s.backend === "redis" && s.redis_url === undefined) issues.push("state.redis_url: required when state.backend is redis (e.g. redis://127.0.0.1:6379/0)");
  if (s.backend === "sqlite" && s.redis_url !== undefined)
    issues.push("state.redis_url: set, but state.backend is sqlite (set backend: redis to share state through it)");
  if (s.lease_ms < 2 * s.sync_interval_ms)
    issues.push(`state.lease_ms: expected at least twice state.sync_interval_ms (${s.sync_interval_ms}), so a live leader renews in time`);
  return issues;
}

export function resolveStateConfig(c: ParsedConfig): { state: StateConfig } {
  const s = c.state;
  return {
    state: {
      backend: s.backend,
      redisUrl: s.redis_url,
      keyPrefix: s.key_prefix,
      gatewayId: s.gateway_id,
      leaseMs: s.lease_ms,
      syncIntervalMs: s.sync_interval_ms,
      quotaAllowance: s.quota_allowance,
      commandTimeoutMs: s.command_timeout_ms,
    },
  };
}

/**
 * The scorers in effect: as configured; or, with backend redis and no
 * `scheduling.scorers` given, the defaults with `prefix-rendezvous` in place
 * of any `prefix-affinity` — each gateway's own memory of where it sent a
 * prefix would send it to a different replica from every gateway. (The
 * defaults' precise-prefix reads the engines' own events, the same for
 * every gateway; where it has none, rendezvous stands in for it too:
 * scheduling.preciseStandIn.)
 */
export function effectiveScorers(c: ParsedConfig, raw: Record<string, unknown>): ParsedConfig["scheduling"]["scorers"] {
  const sched = raw.scheduling;
  const given = typeof sched === "object" && sched !== null && "scorers" in sched;
  if (given || c.state.backend !== "redis") return c.scheduling.scorers;
  return c.scheduling.scorers.map((s) => (s.name === "prefix-affinity" ? { ...s, name: "prefix-rendezvous" as const } : s));
}
