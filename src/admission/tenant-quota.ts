/**
 * Per-tenant requests-per-minute and tokens-per-minute limits as GCRA token
 * buckets, with OpenAI's x-ratelimit-* headers: the in-process limiter of one
 * gateway, and the contract the quota gate charges through (the Redis-backed
 * quota of several gateways, src/shared-state/cluster-quota.ts, implements it
 * too and spends local allowances through this same limiter).
 */
import type { Config } from "../config/types.ts";
import { LlmgwError } from "../shared/errors.ts";

export interface QuotaDecision {
  /** OpenAI's rate-limit headers for the response (only the kinds the tenant has a limit for; empty when unlimited). */
  headers: Record<string, string>;
}

/**
 * What the quota gate charges: the in-process QuotaLimiter (one gateway), or
 * quotas shared by several gateways through Redis (src/shared-state/cluster-quota.ts),
 * whose admit answers later when it has to ask Redis (rarely: see there).
 */
export interface TenantQuota {
  admit(tenant: string, estTokens: number, now: number): QuotaDecision | Promise<QuotaDecision>;
  settle(tenant: string, estTokens: number, actualTokens: number, now: number): void;
}

/** The limits are per minute. */
const WINDOW_MS = 60_000;
/** Floating-point slack: 7 requests of 60000/7 ms must fit a 60000 ms window. */
const EPSILON_MS = 1e-6;

/**
 * A token bucket of `limit` units refilling continuously at limit/60 per second, kept as GCRA's single
 * number: `tat`, the time at which the bucket is full again. Backlog = max(0, tat − now); a take of u
 * units fits while backlog + u·msPerUnit ≤ 60 s. One number, no refill loop, exact for a burst of
 * `limit` at one instant.
 */
class Bucket {
  tat = Number.NEGATIVE_INFINITY;
  readonly msPerUnit: number;
  constructor(readonly limit: number) {
    this.msPerUnit = WINDOW_MS / limit;
  }
  backlogMs(now: number): number {
    return this.tat > now ? this.tat - now : 0;
  }
  /** Milliseconds until `units` fit (0: they fit now). */
  waitMs(units: number, now: number): number {
    const over = this.backlogMs(now) + units * this.msPerUnit - WINDOW_MS;
    return over > EPSILON_MS ? over : 0;
  }
  /**
   * Charge (units > 0) or refund (units < 0). A refund never makes the bucket fuller than full (the
   * backlog floors at 0). A charge after the fact (settle with actual > estimate) may overdraw the bucket,
   * so the tenant waits it off; the debt is capped at one more window so one bad estimate cannot lock a
   * tenant out for longer than a minute beyond an empty bucket.
   */
  charge(units: number, now: number): void {
    const base = this.tat > now ? this.tat : now;
    this.tat = Math.min(base + units * this.msPerUnit, now + 2 * WINDOW_MS);
  }
  remaining(now: number): number {
    const r = Math.floor((WINDOW_MS - this.backlogMs(now)) / this.msPerUnit + 1e-9);
    return r > 0 ? r : 0;
  }
}

interface TenantBuckets {
  requests: Bucket | undefined;
  tokens: Bucket | undefined;
}

/**
 * Per-tenant quotas. Requests per minute and tokens per minute are token buckets (capacity = the
 * per-minute limit, refilling continuously at limit/60 per second), so a tenant may burst its whole
 * minute at once and then proceeds at the steady rate. Tenants without an entry, or without a limit
 * kind, are unlimited for that kind. All methods are O(1) and take the time as `now` (ms).
 */
export class QuotaLimiter implements TenantQuota {
  readonly #tenants = new Map<string, TenantBuckets>();
  /** What a refusal calls the holder of the limits ("tenant", or "API key" for a live key's own). */
  readonly #subject: string;

  constructor(tenants: Config["tenants"], subject = "tenant") {
    this.#subject = subject;
    this.reconfigure(tenants);
  }

  /**
   * New limits (a configuration reload), applied at once. A tenant keeps
   * what it has spent in the last minute, counted against the new limit:
   * lowering a limit cannot hand it a fresh, full bucket, and raising one
   * frees room at once.
   */
  reconfigure(tenants: Config["tenants"], now = Date.now()): void {
    const carried = (old: Bucket | undefined, limit: number | undefined): Bucket | undefined => {
      if (limit === undefined) return undefined;
      const b = new Bucket(limit);
      if (old !== undefined && old.tat > now) b.tat = now + Math.min((old.tat - now) * (b.msPerUnit / old.msPerUnit), 2 * WINDOW_MS);
      return b;
    };
    const previous = new Map(this.#tenants);
    this.#tenants.clear();
    for (const t of tenants) {
      const before = previous.get(t.name);
      const requests = carried(before?.requests, t.requestsPerMinute);
      const tokens = carried(before?.tokens, t.tokensPerMinute);
      if (requests !== undefined || tokens !== undefined) this.#tenants.set(t.name, { requests, tokens });
    }
  }

  /**
   * Admit one request of `estTokens` (reserving them now) or throw RATE_LIMITED (429) naming the limit,
   * with retryAfterS = when both limits would admit it and the x-ratelimit-* headers. Nothing is charged
   * on a refusal. A request whose estimate exceeds the tenant's whole tokens-per-minute limit can never
   * fit: it gets RATE_LIMITED without Retry-After (retrying will not help; lower max_tokens).
   */
  admit(tenant: string, estTokens: number, now: number): QuotaDecision {
    const q = this.#tenants.get(tenant);
    if (q === undefined) return { headers: {} };
    const { requests, tokens } = q;
    if (tokens !== undefined && estTokens > tokens.limit) {
      throw new LlmgwError(
        "RATE_LIMITED",
        `Request too large for ${this.#subject} '${tenant}': about ${estTokens} tokens (prompt plus max_tokens) exceeds its limit of ${tokens.limit} tokens per minute. Lower max_tokens or shorten the prompt.`,
        { headers: rateLimitHeaders(q, now) },
      );
    }
    const waitRequests = requests === undefined ? 0 : requests.waitMs(1, now);
    const waitTokens = tokens === undefined ? 0 : tokens.waitMs(estTokens, now);
    if (waitRequests > 0 || waitTokens > 0) {
      const waitMs = Math.max(waitRequests, waitTokens);
      const which: string[] = [];
      if (waitRequests > 0) which.push(`requests per minute (limit ${requests!.limit})`);
      if (waitTokens > 0) which.push(`tokens per minute (limit ${tokens!.limit}, requested about ${estTokens})`);
      throw new LlmgwError(
        "RATE_LIMITED",
        `Rate limit reached for ${this.#subject} '${tenant}' on ${which.join(" and ")}. Please try again in ${formatResetDuration(waitMs)}.`,
        { retryAfterS: waitMs / 1000, headers: rateLimitHeaders(q, now) },
      );
    }
    requests?.charge(1, now);
    tokens?.charge(estTokens, now);
    return { headers: rateLimitHeaders(q, now) };
  }

  /** Correct the token charge once real usage is known: refund (actual < estimate; 0 gives every token back) or charge the difference. */
  settle(tenant: string, estTokens: number, actualTokens: number, now: number): void {
    const tokens = this.#tenants.get(tenant)?.tokens;
    if (tokens === undefined || actualTokens === estTokens) return;
    tokens.charge(actualTokens - estTokens, now);
  }
}

function rateLimitHeaders(q: TenantBuckets, now: number): Record<string, string> {
  const h: Record<string, string> = {};
  if (q.requests !== undefined) {
    h["x-ratelimit-limit-requests"] = String(q.requests.limit);
    h["x-ratelimit-remaining-requests"] = String(q.requests.remaining(now));
    h["x-ratelimit-reset-requests"] = formatResetDuration(q.requests.backlogMs(now));
  }
  if (q.tokens !== undefined) {
    h["x-ratelimit-limit-tokens"] = String(q.tokens.limit);
    h["x-ratelimit-remaining-tokens"] = String(q.tokens.remaining(now));
    h["x-ratelimit-reset-tokens"] = formatResetDuration(q.tokens.backlogMs(now));
  }
  return h;
}

/**
 * OpenAI's reset format (Go's time.Duration.String, rounded up to the millisecond): "20ms", "1s",
 * "6.5s", "6m0s", "1h2m3s"; "0s" when already full.
 */
export function formatResetDuration(ms: number): string {
  const total = Math.ceil(ms);
  if (!(total > 0)) return "0s";
  if (total < 1000) return `${total}ms`;
  const h = Math.floor(total / 3_600_000);
  const m = Math.floor((total % 3_600_000) / 60_000);
  const s = `${(total % 60_000) / 1000}s`;
  if (h > 0) return `${h}h${m}m${s}`;
  if (m > 0) return `${m}m${s}`;
  return s;
}
