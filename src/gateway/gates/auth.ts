/** Gate 1: who is asking — the API key's tenant and band (api-keys.ts) — from the request's headers, before any body is read. */
import type { GatewayContext } from "../context.ts";
import type { Exchange } from "../request/exchange.ts";
import { LlmgwError } from "../../shared/errors.ts";

/** The auth gate: who is asking, from the request's headers (before any body is read). */
export function authGate(ctx: GatewayContext, x: Exchange, headers: Headers): void {
  try {
    x.principal = ctx.auth.authenticate(headers);
  } catch (err) {
    if (err instanceof LlmgwError && err.code === "INVALID_API_KEY") ctx.metrics.admissionRejections.inc({ band: "none", reason: "unauthorized" });
    throw err;
  }
}
