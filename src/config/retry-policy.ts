/**
 * The closed sets behind `retry.same_endpoint`: the failure classes that may
 * be retried on the same (endpoint, model) before the first byte, and when.
 * A timeout is not a transient blip like a 429 with Retry-After or a single
 * 500: retried on the same route, it costs the client another full deadline.
 */

/** Failures before the first byte that may be retried on the endpoint that failed (the others never are). */
const SAME_ENDPOINT_FAILURES = ["connect", "status_5xx", "status_429", "headers_timeout", "first_token_timeout", "truncated", "malformed"] as const;
export type SameEndpointFailure = (typeof SAME_ENDPOINT_FAILURES)[number];

/**
 * before_fallback: once no other endpoint of the model is left, the same one
 * again before the model's fallback; last_resort: only when no fallback model
 * is left either; never: not on the same endpoint.
 */
export const SAME_ENDPOINT_POLICIES = ["before_fallback", "last_resort", "never"] as const;
export type SameEndpointPolicy = (typeof SAME_ENDPOINT_POLICIES)[number];
