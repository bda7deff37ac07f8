/**
 * The `state` block: where state shared by gateways lives — the
 * embedded bun:sqlite default (one process), or Redis shared by several
 * gateways behind a load balancer — and the timings of their coordination.
 */
import { z } from "zod";
import * as D from "./defaults.ts";
import type { StateBackendName } from "./types.ts";

const STATE_BACKENDS = ["sqlite", "redis"] as const satisfies readonly StateBackendName[];

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
    key_prefix: z
      .string()
      .regex(/^[A-Za-z0-9:_.{}-]{1,64}$/, { message: "expected 1 to 64 letters, digits or ':_.-{}'" })
      .default(D.DEFAULT_STATE_KEY_PREFIX),
    /** This gateway's name among the others (leases, demand); default host-pid. */
    gateway_id: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, { message: "expected an id of letters, digits, '.', '_' or '-' (at most 63)" })
      .optional(),
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

export const STATE_DEFAULTS = stateSchema.parse({});
