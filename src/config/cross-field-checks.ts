/** Checks across keys of a parsed config, each naming the keys it reads, so one whose input failed the schema is skipped rather than judged on a default. */
import { createHash } from "node:crypto";
import { adminConfigIssues } from "./admin-config.ts";
import { fleetConfigIssues } from "./fleet-schema.ts";
import { jobsCrossFieldIssues } from "./jobs-config.ts";
import { kvEventsIssues } from "./kv-events-resolve.ts";
import type { ParsedConfig } from "./schema.ts";
import { stateCrossFieldIssues } from "./state-resolve.ts";
import { tracingIssues } from "./tracing-config.ts";

type Env = Record<string, string | undefined>;

interface CrossFieldCheck {
  /** Key paths the check reads (a prefix covers what is under it). */
  reads: readonly string[];
  run(c: ParsedConfig, env: Env): string[];
}

function endpointIssues(c: ParsedConfig): string[] {
  const issues: string[] = [];
  const seenIds = new Map<string, number>();
  c.endpoints.forEach((e, i) => {
    const first = seenIds.get(e.id);
    if (first !== undefined) issues.push(`endpoints[${i}].id: duplicate endpoint id '${e.id}' (also endpoints[${first}])`);
    if (e.models_source === "static" && (e.models === undefined || e.models.length === 0))
      issues.push(`endpoints[${i}].models: models_source static needs the models listed here`);
    else seenIds.set(e.id, i);
  });
  if (c.endpoints.length > c.max_endpoints) issues.push(`max_endpoints: expected at least the ${c.endpoints.length} configured endpoints`);
  return issues;
}

function modelIssues(c: ParsedConfig): string[] {
  const issues: string[] = [];
  const modelNames = new Map<string, number>();
  c.models.forEach((m, i) => {
    const first = modelNames.get(m.name);
    if (first !== undefined) issues.push(`models[${i}].name: duplicate model '${m.name}' (also models[${first}])`);
    else modelNames.set(m.name, i);
  });
  const aliasOwner = new Map<string, string>();
  c.models.forEach((m, i) => {
    m.aliases.forEach((a, j) => {
      if (modelNames.has(a)) issues.push(`models[${i}].aliases[${j}]: alias '${a}' shadows the model of that name`);
      const owner = aliasOwner.get(a);
      if (owner !== undefined && owner !== m.name) issues.push(`models[${i}].aliases[${j}]: alias '${a}' is already an alias of '${owner}'`);
      aliasOwner.set(a, m.name);
    });
    m.fallback.forEach((f, j) => {
      if (f === m.name) issues.push(`models[${i}].fallback[${j}]: a model cannot fall back to itself`);
      else if (!modelNames.has(f) && !aliasOwner.has(f)) issues.push(`models[${i}].fallback[${j}]: unknown model '${f}' (expected a name under models)`);
    });
  });
  return issues;
}

function scorerIssues(c: ParsedConfig): string[] {
  const issues: string[] = [];
  const scorerSeen = new Set<string>();
  c.scheduling.scorers.forEach((s, i) => {
    if (scorerSeen.has(s.name)) issues.push(`scheduling.scorers[${i}].name: scorer '${s.name}' listed twice`);
    scorerSeen.add(s.name);
  });
  return issues;
}

function bandIssues(c: ParsedConfig): string[] {
  const issues: string[] = [];
  const bandIndex = new Map<string, number>();
  c.admission.bands.forEach((b, i) => {
    if (bandIndex.has(b.name)) issues.push(`admission.bands[${i}].name: duplicate band '${b.name}'`);
    else bandIndex.set(b.name, i);
  });
  if (!bandIndex.has(c.admission.default_band)) {
    issues.push(`admission.default_band: unknown band '${c.admission.default_band}' (expected one of ${[...bandIndex.keys()].join(", ")})`);
  }
  return issues;
}

function authKeyIssues(c: ParsedConfig): string[] {
  const issues: string[] = [];
  const bands = new Set(c.admission.bands.map((b) => b.name));
  const keyHashes = new Map<string, number>();
  c.auth.keys.forEach((k, i) => {
    if (k.max_band !== undefined && !bands.has(k.max_band)) issues.push(`auth.keys[${i}].max_band: unknown band '${k.max_band}'`);
    const hash =
      k.key_sha256 ??
      createHash("sha256")
        .update(k.key ?? "")
        .digest("hex");
    const first = keyHashes.get(hash);
    if (first !== undefined) issues.push(`auth.keys[${i}]: the same key as auth.keys[${first}]`);
    else keyHashes.set(hash, i);
  });
  return issues;
}

function tenantIssues(c: ParsedConfig): string[] {
  const issues: string[] = [];
  const tenantNames = new Set<string>();
  c.tenants.forEach((t, i) => {
    if (tenantNames.has(t.name)) issues.push(`tenants[${i}].name: duplicate tenant '${t.name}'`);
    tenantNames.add(t.name);
  });
  return issues;
}

function deadlineIssues(c: ParsedConfig): string[] {
  const d = c.deadlines;
  if (d.total_ms !== undefined && d.first_token_ms !== undefined && d.total_ms < d.first_token_ms) {
    return [`deadlines.total_ms: expected at least deadlines.first_token_ms (${d.first_token_ms})`];
  }
  return [];
}

const CROSS_FIELD_CHECKS: readonly CrossFieldCheck[] = [
  { reads: ["endpoints", "max_endpoints"], run: endpointIssues },
  { reads: ["models"], run: modelIssues },
  { reads: ["scheduling.scorers"], run: scorerIssues },
  { reads: ["admission.bands", "admission.default_band"], run: bandIssues },
  { reads: ["auth.keys", "admission.bands"], run: authKeyIssues },
  { reads: ["tenants"], run: tenantIssues },
  { reads: ["endpoints", "kv_events"], run: kvEventsIssues },
  { reads: ["deadlines"], run: deadlineIssues },
  { reads: ["gpu_health", "admission.bands"], run: jobsCrossFieldIssues },
  { reads: ["nodes", "fleet"], run: (c, env) => fleetConfigIssues(c.nodes, c.fleet, env) },
  { reads: ["state"], run: stateCrossFieldIssues },
  { reads: ["tracing"], run: (c, env) => tracingIssues(c.tracing, env) },
  { reads: ["admin", "fleet.admin_token"], run: (c) => adminConfigIssues(c.admin, c.fleet.admin_token) },
];

/** Every cross-field issue, skipping the checks for which `skip(reads)` says an input failed the schema. */
export function crossFieldIssues(c: ParsedConfig, env: Env, skip: (reads: readonly string[]) => boolean): string[] {
  return CROSS_FIELD_CHECKS.flatMap((check) => (skip(check.reads) ? [] : check.run(c, env)));
}
