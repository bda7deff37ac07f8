/** Gate 2: charge the live key's own limits and the tenant's quota (admission/tenant-quota.ts) for the request and its estimated tokens, or refuse with 429 and Retry-After. */

import type { QuotaDecision, TenantQuota } from "../../admission/tenant-quota.ts";
import type { Exchange } from "../request/exchange.ts";
import type { AuthGateDeps } from "./auth.ts";

/** What the quota gate uses: the tenants' quotas, and the counter of requests turned away. */
export interface QuotaGateDeps {
  readonly quota: Pick<TenantQuota, "admit">;
  readonly metrics: AuthGateDeps["metrics"];
}

/**
 * The quota gate: charge the tenant's request and estimated tokens, or refuse with 429 and Retry-After.
 * Synchronous unless a shared quota has to ask Redis (then a promise: await it).
 */
export function quotaGate(ctx: QuotaGateDeps, x: Exchange): void | Promise<void> {
  const key = x.principal?.key;
  const now = Date.now();
  let keyCharged = false;
  const refused = (err: unknown): never => {
    ctx.metrics.admissionRejections.inc({ band: x.bandName, reason: "rate_limited" });
    // The key's tokens go back when the tenant refused after the key admitted (its request stays counted, as a tenant's does).
    if (keyCharged) key!.quota!.settle(key!.id, x.estTokens, 0, now);
    x.estTokens = 0; // nothing was charged: nothing to settle
    throw err;
  };
  let decision: QuotaDecision | Promise<QuotaDecision>;
  try {
    // The key's own limits first: they are this gateway's, answered at once; the tenant's may have to ask Redis.
    if (key?.quota !== undefined) {
      key.quota.admit(key.id, x.estTokens, now);
      keyCharged = true;
    }
    decision = ctx.quota.admit(x.tenant, x.estTokens, now);
  } catch (err) {
    return refused(err);
  }
  if (decision instanceof Promise) return decision.then((d) => void (x.quotaHeaders = d.headers), refused);
  x.quotaHeaders = decision.headers;
}
