/**
 * The `state` block (issue 14): where state shared by gateways lives — the
 * embedded bun:sqlite default (one process), or Redis shared by several
 * gateways behind a load balancer — and the timings of their coordination.
 */
import { z } from "zod";
import * as D from "./defaults.ts";
import type { ParsedConfig } from "./schema.ts";

export const STATE_BACKENDS = ["sqlite", "redis"] as const;
export type StateBackendName = (typeof STATE_BACKENDS)[number];

/** Bun's RedisClient takes redis://, rediss:// (TLS) and valkey:// URLs; a path selects the database number. */
function isRedisUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return (u.protocol === "redis:" || u.protocol === "rediss:" || u.protocol === "valkey:") && u.hostname !== "";
  } catch {
    return false;
  }
}

export const stateSchema = z
  .object({
    backend: z.enum(STATE_BACKENDS).default("sqlite"),
    /** Required with backend redis. */
    redis_url: z.string().refine(isRedisUrl, { message: "expected a redis:// or rediss:// URL, e.g. redis://127.0.0.1:6379/0" }).optional(),
    /** Every key llmgw writes starts with this: several llmgw clusters may share one Redis. */
    key_prefix: z.string().regex(/^[A-Za-z0-9:_.{}-]{1,64}$/, { message: "expected 1 to 64 letters, digits or ':_.-{}'" }).default(D.DEFAULT_STATE_KEY_PREFIX),
    /** This gateway's name among the others (leases, demand); default host-pid. */
    gateway_id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, { message: "expected an id of letters, digits, '.', '_' or '-' (at most 63)" }).optional(),
    /** The reconciler lease: a leader that stopped renewing is replaced after this long. */
    lease_ms: z.number().int().min(500).max(600_000).default(D.DEFAULT_STATE_LEASE_MS),
    /** How often gateways exchange per-pool demand (admission shares) and followers re-read the fleet's desired state. */
    sync_interval_ms: z.number().int().min(100).max(60_000).default(D.DEFAULT_STATE_SYNC_INTERVAL_MS),
    /** The part of a tenant's per-minute limit a gateway takes from Redis at once and spends locally. */
    quota_allowance: z.number().min(0.001).max(0.5).default(D.DEFAULT_STATE_QUOTA_ALLOWANCE),
    /** A Redis command that has not answered after this long fails (the gateway then fails static). */
    command_timeout_ms: z.number().int().min(50).max(60_000).default(D.DEFAULT_STATE_COMMAND_TIMEOUT_MS),
  })
  .strict();

export interface StateConfig {
  backend: StateBackendName;
  /** Set when backend is redis. */
  redisUrl: string | undefined;
  keyPrefix: string;
  /** undefined: the gateway names itself (host and pid). */
  gatewayId: string | undefined;
  leaseMs: number;
  syncIntervalMs: number;
  quotaAllowance: number;
  commandTimeoutMs: number;
}

export const STATE_DEFAULTS = stateSchema.parse({});

export function stateCrossFieldIssues(c: ParsedConfig): string[] {
  const s = c.state;
  const issues: string[] = [];
  if (s.backend === "redis" && s.redis_url === undefined) issues.push("state.redis_url: required when state.backend is redis (e.g. redis://127.0.0.1:6379/0)");
  if (s.backend === "sqlite" && s.redis_url !== undefined) issues.push("state.redis_url: set, but state.backend is sqlite (set backend: redis to share state through it)");
  if (s.lease_ms < 2 * s.sync_interval_ms) issues.push(`state.lease_ms: expected at least twice state.sync_interval_ms (${s.sync_interval_ms}), so a live leader renews in time`);
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
 * of `prefix-affinity` — each gateway's own memory of where it sent a prefix
 * would send it to a different replica from every gateway.
 */
export function effectiveScorers(c: ParsedConfig, raw: Record<string, unknown>): ParsedConfig["scheduling"]["scorers"] {
  const sched = raw.scheduling;
  const given = typeof sched === "object" && sched !== null && "scorers" in sched;
  if (given || c.state.backend !== "redis") return c.scheduling.scorers;
  return c.scheduling.scorers.map((s) => (s.name === "prefix-affinity" ? { ...s, name: "prefix-rendezvous" as const } : s));
}
