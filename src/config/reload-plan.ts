/** What a configuration reload would change, classified key by key: applied live, or refused because it needs a restart. */

import type { Config, EndpointConfig } from "./types.ts";

/**
 * Keys (wire form, dotted) whose whole subtree the running gateway can swap
 * between requests. Anything not under one of these needs a restart: the
 * listeners are bound, the state backend and data_dir are open, and the
 * workers and shared tables were sized from the rest at start.
 */
const LIVE_KEYS: readonly string[] = [
  "endpoints",
  "models",
  "deadlines",
  "auth",
  "tenants",
  "retry",
  "continuation",
  "scheduling.scorers",
  "scheduling.filters",
  "scheduling.picker",
];

interface EndpointChanges {
  added: readonly EndpointConfig[];
  /** Ids of configured endpoints no longer in the file: they drain (open streams finish, no new requests). */
  removed: readonly string[];
  /** Same id, something else changed (URL, pool, models, headers …): re-added under the same id. */
  changed: readonly EndpointConfig[];
}

export interface ReloadPlan {
  /** Live keys whose value changed (dotted wire-form paths, in document order). */
  live: readonly string[];
  /** Keys that changed but need a restart, each with why where it is not just "not live"; non-empty: the reload is refused as a whole. */
  refused: readonly string[];
  endpoints: EndpointChanges;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => same(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) if (!same(a[k], b[k])) return false;
    return true;
  }
  return false;
}

/** Walks both documents; a changed path under a live key is live, any other changed leaf (or a key added or removed) is refused. */
function changedPaths(a: unknown, b: unknown, path: string, live: string[], refused: string[]): void {
  if (same(a, b)) return;
  if (path !== "" && LIVE_KEYS.includes(path)) {
    live.push(path);
    return;
  }
  const underLive = LIVE_KEYS.some((k) => k.startsWith(`${path}.`));
  if (isObject(a) && isObject(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) changedPaths(a[k], b[k], path === "" ? k : `${path}.${k}`, live, refused);
    return;
  }
  // A subtree with live keys below it that appeared or went as a whole: the live part is judged by its key, the rest refused.
  if (underLive && (isObject(a) || isObject(b))) {
    changedPaths(isObject(a) ? a : {}, isObject(b) ? b : {}, path, live, refused);
    return;
  }
  refused.push(path);
}

function endpointChanges(running: readonly EndpointConfig[], next: readonly EndpointConfig[]): EndpointChanges {
  const before = new Map(running.map((e) => [e.id, e]));
  const after = new Set(next.map((e) => e.id));
  const added: EndpointConfig[] = [];
  const changed: EndpointConfig[] = [];
  for (const e of next) {
    const old = before.get(e.id);
    if (old === undefined) added.push(e);
    else if (!same(old, e)) changed.push(e);
  }
  return { added, removed: running.filter((e) => !after.has(e.id)).map((e) => e.id), changed };
}

/**
 * The plan for replacing `running` by `next`. Extra conditions of the
 * running gateway (quotas kept in Redis, what the scheduling profile's
 * workers were wired to read) are checked by the caller, which adds its own
 * refusals: this is the part that depends on the two documents alone.
 */
export function planReload(running: Pick<Config, "document" | "endpoints">, next: Pick<Config, "document" | "endpoints">): ReloadPlan {
  const live: string[] = [];
  const refused: string[] = [];
  changedPaths(running.document, next.document, "", live, refused);
  return { live, refused, endpoints: endpointChanges(running.endpoints, next.endpoints) };
}

/** What a reload did: applied (the live keys and endpoints that changed), an invalid file, or a change refused by name. */
export type ReloadOutcome =
  | { result: "ok"; changed: readonly string[]; endpoints: { added: string[]; removed: string[]; changed: string[] } }
  | { result: "invalid"; message: string; issues: readonly string[] }
  | { result: "refused"; message: string; keys: readonly string[] };
