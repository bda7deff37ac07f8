/**
 * Tenant quotas shared by several gateways. Each limit is one
 * GCRA bucket in Redis (the same arithmetic as the in-process QuotaLimiter:
 * a "theoretical arrival time", refilled continuously at limit per minute),
 * changed only by atomic scripts on Redis's clock. A gateway does not ask
 * Redis per request: it takes an *allowance* — `state.quota_allowance` of the
 * per-minute limit — out of the bucket at once and spends it locally, so
 * only one request in an allowance pays a round trip.
 *
 * Error bound. Every admitted unit was first taken out of the shared bucket,
 * so the gateways together never admit more than the bucket allows (token
 * charges corrected after the fact aside, as with one gateway). What they
 * may under-admit is what sits taken but unspent: at most one allowance per
 * gateway and limit (N × quota_allowance × limit), given back after two idle
 * seconds, plus up to one allowance left in the bucket while every gateway
 * waits for a whole one to refill. While Redis is unreachable each gateway spends what it holds,
 * then enforces its share (limit / number of gateways last seen) with a
 * bucket of its own: quotas fail static.
 */

import { formatResetDuration, type QuotaDecision, QuotaLimiter, type TenantQuota } from "../admission/tenant-quota.ts";
import type { TenantConfig } from "../config/types.ts";
import { LlmgwError } from "../shared/errors.ts";
import { logger } from "../shared/logger.ts";
import { type RedisConnection, RedisScript } from "./redis-connection.ts";

const WINDOW_MS = 60_000;
/** An allowance unused this long goes back to the shared bucket. */
const IDLE_RETURN_MS = 2_000;

/**
 * Take between `min` and `want` units (as many as fit) from a GCRA bucket, on
 * Redis's clock. KEYS: bucket. ARGV: want, min, ms per unit, window ms.
 * → {taken, ms until `want` would fit (when none was taken), backlog ms after}.
 * An empty bucket is asked again only once a whole allowance has refilled:
 * nothing is lost by waiting (the bucket keeps what it refills, up to a
 * minute's worth), and gateways do not poll Redis one unit at a time.
 */
const TAKE = new RedisScript(
  "quota-take",
  `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local per = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
local base = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), now)
local free = window - (base - now)
local avail = math.floor(free / per + 1e-9)
local min = tonumber(ARGV[2])
if avail < min then return {0, tostring(math.ceil(tonumber(ARGV[1]) * per - free)), tostring(base - now)} end
local take = math.min(tonumber(ARGV[1]), avail)
local tat = base + take * per
redis.call('SET', KEYS[1], tostring(tat), 'PX', math.ceil(tat - now) + 1000)
return {take, '0', tostring(tat - now)}`,
);

/** Give units back (never fuller than full). KEYS: bucket. ARGV: units, ms per unit. */
const GIVE = new RedisScript(
  "quota-give",
  `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat <= now then return 0 end
tat = math.max(now, tat - tonumber(ARGV[1]) * tonumber(ARGV[2]))
redis.call('SET', KEYS[1], tostring(tat), 'PX', math.ceil(tat - now) + 1000)
return 1`,
);

interface Allowance {
  kind: "requests" | "tokens";
  limit: number;
  msPerUnit: number;
  /** Units taken per fetch (at least what the request needs). */
  chunk: number;
  key: string;
  /** Held here, taken from the shared bucket and not yet spent (negative: owed, after a usage correction). */
  units: number;
  /** The shared bucket lacked what was asked until then (local clock): refuse without asking again. */
  emptyUntil: number;
  /** The shared bucket's backlog at the last fetch, and when (for the reset header). */
  backlogMs: number;
  backlogAt: number;
  fetching: Promise<void> | undefined;
  lastUsedAt: number;
}

interface Tenant {
  requests: Allowance | undefined;
  tokens: Allowance | undefined;
}

interface ClusterQuotaOptions {
  prefix: string;
  /** state.quota_allowance: the part of a per-minute limit fetched at once. */
  allowance: number;
  /** How many gateways share the limits (the last count seen; fail-static share). */
  gateways: () => number;
  now?: () => number;
}

const NO_HEADERS: QuotaDecision = Object.freeze({ headers: Object.freeze({}) as Record<string, string> });

export class ClusterQuota implements TenantQuota {
  readonly #tenants = new Map<string, Tenant>();
  readonly #configs: readonly TenantConfig[];
  readonly #r: RedisConnection;
  readonly #o: ClusterQuotaOptions;
  readonly #now: () => number;
  /** The local share while Redis is away, built for this many gateways. */
  #fallback: { limiter: QuotaLimiter; gateways: number } | undefined;
  /** Admissions decided from a local allowance, after a fetch, and while failing static. */
  readonly stats = { local: 0, fetched: 0, failStatic: 0, fetches: 0 };

  constructor(tenants: readonly TenantConfig[], redis: RedisConnection, opts: ClusterQuotaOptions) {
    this.#configs = tenants;
    this.#r = redis;
    this.#o = opts;
    this.#now = opts.now ?? Date.now;
    const allowance = (tenant: string, kind: Allowance["kind"], limit: number | undefined): Allowance | undefined =>
      limit === undefined
        ? undefined
        : {
            kind,
            limit,
            msPerUnit: WINDOW_MS / limit,
            chunk: Math.max(1, Math.ceil(limit * opts.allowance)),
            key: `${opts.prefix}quota:${tenant}:${kind}`,
            units: 0,
            emptyUntil: 0,
            backlogMs: 0,
            backlogAt: 0,
            fetching: undefined,
            lastUsedAt: 0,
          };
    for (const t of tenants) {
      const requests = allowance(t.name, "requests", t.requestsPerMinute);
      const tokens = allowance(t.name, "tokens", t.tokensPerMinute);
      if (requests || tokens) this.#tenants.set(t.name, { requests, tokens });
    }
  }

  admit(tenant: string, estTokens: number, now: number): QuotaDecision | Promise<QuotaDecision> {
    const q = this.#tenants.get(tenant);
    if (q === undefined) return NO_HEADERS;
    if (q.tokens !== undefined && estTokens > q.tokens.limit) {
      throw new LlmgwError(
        "RATE_LIMITED",
        `Request too large for tenant '${tenant}': about ${estTokens} tokens (prompt plus max_tokens) exceeds its limit of ${q.tokens.limit} tokens per minute. Lower max_tokens or shorten the prompt.`,
        { headers: headers(q, now) },
      );
    }
    if (this.#spend(q, estTokens, now)) {
      this.stats.local++;
      return { headers: headers(q, now) };
    }
    if (!this.#r.up) return this.#failStatic(tenant, estTokens, now);
    const wait = Math.max(waitOf(q.requests, 1, now), waitOf(q.tokens, estTokens, now));
    if (wait > 0) throw refusal(tenant, q, estTokens, wait, now);
    return this.#fetchAndAdmit(tenant, q, estTokens);
  }

  /** Spend from the local allowances when both suffice. */
  #spend(q: Tenant, estTokens: number, now: number): boolean {
    if ((q.requests !== undefined && q.requests.units < 1) || (q.tokens !== undefined && q.tokens.units < estTokens)) return false;
    if (q.requests) {
      q.requests.units -= 1;
      q.requests.lastUsedAt = now;
    }
    if (q.tokens) {
      q.tokens.units -= estTokens;
      q.tokens.lastUsedAt = now;
    }
    return true;
  }

  async #fetchAndAdmit(tenant: string, q: Tenant, estTokens: number): Promise<QuotaDecision> {
    try {
      await Promise.all([this.#fetch(q.requests, 1), this.#fetch(q.tokens, estTokens)]);
    } catch (err) {
      if (err instanceof LlmgwError && err.code === "STATE_UNAVAILABLE") return this.#failStatic(tenant, estTokens, this.#now());
      throw err;
    }
    const now = this.#now();
    if (this.#spend(q, estTokens, now)) {
      this.stats.fetched++;
      return { headers: headers(q, now) };
    }
    throw refusal(tenant, q, estTokens, Math.max(waitOf(q.requests, 1, now), waitOf(q.tokens, estTokens, now), 1), now);
  }

  /** Bring the allowance up to `need` units from the shared bucket (one fetch at a time per limit). */
  async #fetch(a: Allowance | undefined, need: number): Promise<void> {
    if (a === undefined || a.units >= need) return;
    if (a.fetching) {
      await a.fetching;
      if (a.units >= need || this.#now() < a.emptyUntil) return;
    }
    const missing = need - a.units;
    a.fetching = (async () => {
      this.stats.fetches++;
      const sentAt = this.#now();
      const r = (await this.#r.eval(TAKE, [a.key], [Math.max(missing, a.chunk), missing, a.msPerUnit, WINDOW_MS])) as (number | string)[];
      const taken = Number(r[0]);
      a.units += taken;
      a.backlogMs = Number(r[2]);
      a.backlogAt = sentAt;
      if (taken === 0) a.emptyUntil = sentAt + Number(r[1]);
    })().finally(() => (a.fetching = undefined));
    await a.fetching;
  }

  #failStatic(tenant: string, estTokens: number, now: number): QuotaDecision {
    const gateways = Math.max(1, this.#o.gateways());
    if (this.#fallback?.gateways !== gateways) {
      const share = (limit: number | undefined) => (limit === undefined ? undefined : Math.max(1, Math.floor(limit / gateways)));
      const limiter = new QuotaLimiter(
        this.#configs.map((t) => ({ name: t.name, requestsPerMinute: share(t.requestsPerMinute), tokensPerMinute: share(t.tokensPerMinute) })),
      );
      this.#fallback = { limiter, gateways };
      logger().warn({ gateways }, "quotas fail static: each limit enforced locally at its share until Redis answers again");
    }
    const d = this.#fallback.limiter.admit(tenant, estTokens, now);
    this.stats.failStatic++;
    return d;
  }

  /** Correct the charge once usage is known (0 for a request that never reached an engine gives every token back). */
  settle(tenant: string, estTokens: number, actualTokens: number, now: number): void {
    const a = this.#tenants.get(tenant)?.tokens;
    if (a === undefined || actualTokens === estTokens) return;
    a.units -= actualTokens - estTokens;
    this.#fallback?.limiter.settle(tenant, estTokens, actualTokens, now);
    this.#giveBackExcess(a);
  }

  /** Refunds must not pile up here, out of the other gateways' reach. */
  #giveBackExcess(a: Allowance): void {
    if (a.units > 2 * a.chunk) void this.#give(a, a.units - a.chunk);
  }

  async #give(a: Allowance, units: number): Promise<void> {
    if (units <= 0) return;
    a.units -= units;
    try {
      await this.#r.eval(GIVE, [a.key], [units, a.msPerUnit]);
    } catch {
      a.units += units; // Redis away: keep them here
    }
  }

  /** Give back every allowance unused for a while (the sync loop calls this); Redis is back: local shares end. */
  async tick(now = this.#now()): Promise<void> {
    if (this.#r.up) this.#fallback = undefined;
    const idle: Promise<void>[] = [];
    for (const q of this.#tenants.values()) {
      for (const a of [q.requests, q.tokens]) if (a && a.units > 0 && !a.fetching && now - a.lastUsedAt >= IDLE_RETURN_MS) idle.push(this.#give(a, a.units));
    }
    await Promise.all(idle);
  }

  /** Units held locally per tenant and kind (for tests and the admin view). */
  held(tenant: string): { requests: number | undefined; tokens: number | undefined } {
    const q = this.#tenants.get(tenant);
    return { requests: q?.requests?.units, tokens: q?.tokens?.units };
  }
}

/** How long until the shared bucket may have `need` units, when the allowance lacks them and the bucket said so (0: ask). */
function waitOf(a: Allowance | undefined, need: number, now: number): number {
  if (a === undefined || a.units >= need || a.emptyUntil <= now) return 0;
  return a.emptyUntil - now;
}

function refusal(tenant: string, q: Tenant, estTokens: number, waitMs: number, now: number): LlmgwError {
  const which: string[] = [];
  if (q.requests && q.requests.units < 1) which.push(`requests per minute (limit ${q.requests.limit})`);
  if (q.tokens && q.tokens.units < estTokens) which.push(`tokens per minute (limit ${q.tokens.limit}, requested about ${estTokens})`);
  return new LlmgwError(
    "RATE_LIMITED",
    `Rate limit reached for tenant '${tenant}' on ${which.join(" and ") || "its limits"}. Please try again in ${formatResetDuration(waitMs)}.`,
    {
      retryAfterS: waitMs / 1000,
      headers: headers(q, now),
    },
  );
}

/** OpenAI's x-ratelimit-* headers, as this gateway knows them: the shared bucket at its last fetch plus what it holds. */
function headers(q: Tenant, now: number): Record<string, string> {
  const h: Record<string, string> = {};
  for (const a of [q.requests, q.tokens]) {
    if (a === undefined) continue;
    const backlog = Math.max(0, a.backlogMs - (now - a.backlogAt));
    const remaining = Math.max(0, Math.floor((WINDOW_MS - backlog) / a.msPerUnit + 1e-9) + Math.floor(a.units));
    h[`x-ratelimit-limit-${a.kind}`] = String(a.limit);
    h[`x-ratelimit-remaining-${a.kind}`] = String(Math.min(a.limit, remaining));
    h[`x-ratelimit-reset-${a.kind}`] = formatResetDuration(backlog);
  }
  return h;
}
