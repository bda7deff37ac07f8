/**
 * Which requests the response cache may answer, and their key: deterministic
 * requests only (temperature 0, a fixed integer seed, or embeddings, which
 * are deterministic by nature), keyed by tenant, route and the normalised
 * request (keys sorted, the model resolved to its canonical name, fields
 * that do not change the answer dropped), hashed.
 */
import { createHash } from "node:crypto";

export type CacheRoute = "chat" | "completions" | "embeddings";

/** Fields that identify or bill the caller but do not change the answer. */
const IGNORED_FIELDS = new Set(["user", "metadata", "store", "service_tier"]);

export function isDeterministic(route: CacheRoute, body: Readonly<Record<string, unknown>>): boolean {
  if (route === "embeddings") return true;
  return body.temperature === 0 || (typeof body.seed === "number" && Number.isInteger(body.seed));
}

/** JSON with object keys sorted at every depth (arrays keep their order: message order is meaning). */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** The cache key, or undefined when the request is not deterministic. `model` is the canonical name (aliases share entries). */
export function responseCacheKey(tenant: string, route: CacheRoute, model: string, body: Readonly<Record<string, unknown>>): string | undefined {
  if (!isDeterministic(route, body)) return undefined;
  const normalised: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) if (!IGNORED_FIELDS.has(k)) normalised[k] = v;
  normalised.model = model;
  // The tenant is part of the hashed text, so one tenant can never be served another's entry.
  return createHash("sha256")
    .update(`${tenant}\u0000${route}\u0000${canonicalJson(normalised)}`)
    .digest("hex");
}
