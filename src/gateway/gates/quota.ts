/** Gate 2: charge the tenant's quota (admission/tenant-quota.ts) for the request and its estimated tokens, or refuse with 429 and Retry-After. */

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
  const refused = (err: unknown): never => {
    ctx.metrics.admissionRejections.inc({ band: x.bandName, reason: "rate_limited" });
    x.estTokens = 0; // nothing was charged: nothing to settle
    throw err;
  };
  let decision: QuotaDecision | Promise<QuotaDecision>;
  try {
    decision = ctx.quota.admit(x.tenant, x.estTokens, Date.now());
  } catch (err) {
    return refused(err);
  }
  if (decision instanceof Promise) return decision.then((d) => void (x.quotaHeaders = d.headers), refused);
  x.quotaHeaders = decision.headers;
}
