/**
 * The effective configuration as YAML (`llmgw serve --print-config`): the
 * validated document with defaults, flags and LLMGW_* overrides merged, and
 * every secret masked — API keys, agent and admin tokens, the password of a
 * Redis URL (or of any URL), every value of an endpoint's `headers` — so the output can be pasted into an issue or a chat.
 */
import { stringify } from "yaml";

export const MASK = "********";

/** Key names whose values are secrets wherever they appear (auth.keys[].key, nodes[].token, fleet.admin_token, fleet.registration_token). */
const SECRET_KEYS: ReadonlySet<string> = new Set(["key", "token", "admin_token", "registration_token"]);
/** Keys holding URLs (`url`, `redis_url`, `dcgm_url` …): their user information (a Redis password) is a secret. */
const isUrlKey = (key: string) => key === "url" || key.endsWith("_url");
/** Maps whose every value may be a secret (an endpoint's extra `headers`: X-Api-Key, a cookie). */
const SECRET_MAPS: ReadonlySet<string> = new Set(["headers"]);

/** `redis://:pw@host:6379/0` → `redis://:********@host:6379/0`; a URL without user information is left alone. */
export function maskUrlPassword(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return MASK;
  }
  if (u.password === "" && u.username === "") return url;
  // A lone user part is a password to Redis (AUTH <password>) when no user name is given.
  if (u.password !== "") u.password = MASK;
  else u.username = MASK;
  return u.toString();
}

/** A deep copy of `value` with every secret replaced by MASK. */
export function maskSecrets(value: unknown, key?: string): unknown {
  if (Array.isArray(value)) return value.map((v) => maskSecrets(v));
  if (typeof value === "object" && value !== null) {
    // A headers map (tracing.headers) carries credentials under any header name.
    if (key === "headers") return Object.fromEntries(Object.keys(value).map((k) => [k, MASK]));
    const out: Record<string, unknown> = {};
    const all = key !== undefined && SECRET_MAPS.has(key);
    for (const [k, v] of Object.entries(value)) out[k] = all ? MASK : maskSecrets(v, k);
    return out;
  }
  if (typeof value === "string" && key !== undefined) {
    if (SECRET_KEYS.has(key)) return MASK;
    if (isUrlKey(key)) return maskUrlPassword(value);
  }
  return value;
}

/** The document as YAML under a header saying what it is. */
export function effectiveConfigYaml(document: Readonly<Record<string, unknown>>, header: readonly string[]): string {
  const comment = header.map((l) => `# ${l}`).join("\n");
  return `${comment}\n${stringify(maskSecrets(document))}`;
}
