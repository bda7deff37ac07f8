/** Gate 1: who is asking — the API key's tenant and band (api-keys.ts) — from the request's headers, before any body is read; one behaviour for every route that needs a key. */
import type { AdmissionRejection } from "../../metrics/names.ts";
import { asLlmgwError, errorResponse, type LlmgwError } from "../../shared/errors.ts";
import type { Authenticator, Principal } from "../api-keys.ts";

/** What the auth gate uses: the key table, and the counter of requests turned away. */
export interface AuthGateDeps {
  readonly auth: Pick<Authenticator, "authenticate">;
  readonly metrics: { readonly admissionRejections: { inc(labels: { band: string; reason: AdmissionRejection }): void } };
}

/**
 * A refusal by the auth gate closes the connection: it comes before the body
 * is read, and a client without a key must not hold the socket open while
 * Bun drains what it declared (nor keep it for its next request).
 */
export const AUTH_REFUSAL_HEADERS = { connection: "close" } as const;

/** The principal asking; throws the refusal (401 INVALID_API_KEY, counted as `unauthorized`; 400 for a bad priority header). */
export function authGate(deps: AuthGateDeps, headers: Headers): Principal {
  try {
    return deps.auth.authenticate(headers);
  } catch (err) {
    const e = asLlmgwError(err);
    if (e.code === "INVALID_API_KEY") deps.metrics.admissionRejections.inc({ band: "none", reason: "unauthorized" });
    throw e;
  }
}

/** The auth gate's answer to a refused request, in OpenAI's error shape: what every route outside the inference pipeline returns. */
function authRefusal(err: LlmgwError, headers: Record<string, string> = {}): Response {
  return errorResponse(err, { ...headers, ...AUTH_REFUSAL_HEADERS });
}

/** For a route outside the inference pipeline: the principal, or the refusal to answer with. */
export function authenticateRoute(deps: AuthGateDeps, req: Request): Principal | Response {
  try {
    return authGate(deps, req.headers);
  } catch (err) {
    return authRefusal(asLlmgwError(err));
  }
}
