/**
 * Configuration: YAML file → defaults → LLMGW_* environment overrides → zod
 * validation → cross-field checks → a frozen, typed Config. Every failure is a
 * ConfigError listing each offending key path and what was expected, schema
 * and cross-field errors together.
 */

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { parse as parseYaml, YAMLParseError } from "yaml";
import { toAdminConfig } from "./admin-config.ts";
import { boundIssues, nestingIssue, parseCollecting, readsFailed } from "./collect-issues.ts";
import { crossFieldIssues } from "./cross-field-checks.ts";
import * as D from "./defaults.ts";
import { toFleetConfig, toNodeConfigs } from "./fleet-schema.ts";
import { resolveJobsConfig } from "./jobs-config.ts";
import { resolveKvEventsConfig } from "./kv-events-resolve.ts";
import { resolveResponsesConfig } from "./responses-config.ts";
import { dropRetiredKeys } from "./retired-keys.ts";
import { configSchema, type ParsedConfig } from "./schema.ts";
import { effectiveScorers, resolveStateConfig } from "./state-resolve.ts";
import { resolveTracingConfig } from "./tracing-config.ts";
import type { Config, Deadlines, Listen } from "./types.ts";
import { resolveUpstreamHeaders } from "./upstream-credentials.ts";

export function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

export class ConfigError extends Error {
  readonly issues: readonly string[];
  constructor(source: string, issues: string[]) {
    const listed = boundIssues(issues);
    super(`invalid configuration (${source}):\n${listed.map((i) => `  ${i}`).join("\n")}`);
    this.name = "ConfigError";
    this.issues = listed;
  }
}

/**
 * Where a value that is not in the config file came from, by key path
 * (`retry.max_attempts` → `LLMGW_RETRY__MAX_ATTEMPTS`, `listen` → `--listen`),
 * so an error about it names what the operator actually typed. Values are
 * never repeated: a token set by a variable must not land in a log.
 */
type ConfigOrigins = Map<string, string>;

/** The origin of the longest recorded path that `path` starts with (`endpoints[2]` covers `endpoints[2].url`). */
function originOf(path: string, origins: ConfigOrigins): string | undefined {
  let best: string | undefined;
  let bestLength = -1;
  for (const [key, origin] of origins) {
    const covers = path === key || path.startsWith(`${key}.`) || path.startsWith(`${key}[`);
    if (covers && key.length > bestLength) {
      best = origin;
      bestLength = key.length;
    }
  }
  return best;
}

/** `path: message` issues with `(set by ORIGIN)` added where the value came from a flag or a variable; and the source to name for them all. */
function attribute(issues: string[], origins: ConfigOrigins, source: string): { issues: string[]; source: string } {
  if (origins.size === 0) return { issues, source };
  const named = new Set<string>();
  let unattributed = 0;
  const out = issues.map((issue) => {
    const origin = originOf(issue.slice(0, issue.indexOf(":")), origins);
    if (origin === undefined) {
      unattributed++;
      return issue;
    }
    named.add(origin);
    return `${issue} (set by ${origin})`;
  });
  // Only what the operator set outside the file is wrong: name that, not the file or "flags".
  return { issues: out, source: unattributed === 0 ? [...named].join(", ") : source };
}

const ENV_PREFIX = "LLMGW_";
/**
 * Only variables naming a top-level config key are overrides; other LLMGW_*
 * variables belong to other parts of llmgw (LLMGW_CONFIG, LLMGW_AGENT_TOKEN,
 * LLMGW_PARENT_PID …) and are left alone.
 */
const CONFIG_KEYS: ReadonlySet<string> = new Set(Object.keys(configSchema.shape));

/**
 * Variables that name a key by a shorter name than LLMGW_<A>__<B>: the admin
 * token is LLMGW_ADMIN_TOKEN for `serve` (fleet.admin_token) and for `ctl`
 * (its --token) alike.
 */
const ENV_ALIASES: Readonly<Record<string, readonly string[]>> = { LLMGW_ADMIN_TOKEN: ["fleet", "admin_token"] };

/** Environment variables that set config keys, as [variable, key path], aliases first so the long form wins where both are set. */
function envSettings(env: Record<string, string | undefined>): [string, string[], string][] {
  const out: [string, string[], string][] = [];
  for (const [name, path] of Object.entries(ENV_ALIASES)) {
    const value = env[name];
    if (value !== undefined) out.push([name, [...path], value]);
  }
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith(ENV_PREFIX) || value === undefined || name in ENV_ALIASES) continue;
    const path = name.slice(ENV_PREFIX.length).toLowerCase().split("__");
    if (CONFIG_KEYS.has(path[0]!)) out.push([name, path, value]);
  }
  return out;
}

/**
 * LLMGW_LISTEN=… sets `listen`; a double underscore descends:
 * LLMGW_HEALTH__POLL_INTERVAL_MS=500 sets `health.poll_interval_ms`. Values are
 * read as YAML scalars, so numbers, booleans and `null` keep their types.
 * `origins` records which variable set each path.
 */
export function applyEnvOverrides(
  raw: Record<string, unknown>,
  env: Record<string, string | undefined>,
  origins: ConfigOrigins = new Map(),
): Record<string, unknown> {
  const out = structuredClone(raw);
  for (const [name, path, value] of envSettings(env)) {
    origins.set(path.join("."), name);
    let node: Record<string, unknown> = out;
    for (const key of path.slice(0, -1)) {
      const next = node[key];
      if (typeof next !== "object" || next === null || Array.isArray(next)) node[key] = {};
      node = node[key] as Record<string, unknown>;
    }
    let parsed: unknown;
    try {
      parsed = parseYaml(value);
    } catch {
      parsed = value;
    }
    node[path[path.length - 1]!] = parsed;
  }
  return out;
}

function parseListen(value: string): Listen {
  const i = value.lastIndexOf(":");
  const host = value.slice(0, i).replace(/^\[(.*)\]$/, "$1");
  return { host: host === "" ? "0.0.0.0" : host, port: Number(value.slice(i + 1)) };
}

type WireDeadlines = ParsedConfig["deadlines"];

function resolveDeadlines(base: Deadlines, wire: WireDeadlines): Deadlines {
  return {
    dialMs: wire.dial_ms ?? base.dialMs,
    headersMs: wire.headers_ms ?? base.headersMs,
    firstTokenMs: wire.first_token_ms ?? base.firstTokenMs,
    idleMs: wire.idle_ms ?? base.idleMs,
    totalMs: wire.total_ms ?? base.totalMs,
  };
}

const BUILTIN_DEADLINES: Deadlines = {
  dialMs: D.DEFAULT_DIAL_TIMEOUT_MS,
  headersMs: D.DEFAULT_HEADERS_TIMEOUT_MS,
  firstTokenMs: D.DEFAULT_FIRST_TOKEN_TIMEOUT_MS,
  idleMs: D.DEFAULT_IDLE_TIMEOUT_MS,
  totalMs: D.DEFAULT_TOTAL_TIMEOUT_MS,
};

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** A ConfigError whose issues name the flag or variable that set each bad value, where one did. */
function configError(source: string, issues: string[], origins: ConfigOrigins): ConfigError {
  const a = attribute(issues, origins, source);
  return new ConfigError(a.source, a.issues);
}

/** The two spellings of the admin token must agree where both are set (one of them would be silently ignored). */
function aliasIssues(env: Record<string, string | undefined>): string[] {
  const short = env.LLMGW_ADMIN_TOKEN;
  const long = env.LLMGW_FLEET__ADMIN_TOKEN;
  if (short === undefined || long === undefined || short === long) return [];
  return ["fleet.admin_token: LLMGW_ADMIN_TOKEN and LLMGW_FLEET__ADMIN_TOKEN are both set and differ; set one"];
}

/**
 * Validate an already-parsed document (YAML object) plus environment.
 * `origins`: paths the command's flags set (see loadConfigFile); errors about
 * them name the flag, and errors about LLMGW_* values name the variable.
 */
export function buildConfig(raw: unknown, env: Record<string, string | undefined> = {}, source = "config", flagOrigins: ConfigOrigins = new Map()): Config {
  if (raw !== null && raw !== undefined && (typeof raw !== "object" || Array.isArray(raw))) {
    throw new ConfigError(source, ["(root): expected a mapping of keys"]);
  }
  const tooDeep = nestingIssue(raw);
  if (tooDeep !== undefined) throw new ConfigError(source, [tooDeep]);
  const origins: ConfigOrigins = new Map(flagOrigins);
  const withEnv = applyEnvOverrides((raw ?? {}) as Record<string, unknown>, env, origins);
  const warnings = dropRetiredKeys(withEnv);
  // Schema errors and cross-field errors in one report: the checks run over what parsed, skipping those whose input failed.
  const parsed = parseCollecting(configSchema, withEnv);
  if (parsed.data === undefined) throw configError(source, parsed.issues, origins);
  const c = parsed.data;
  const skip = (reads: readonly string[]) => readsFailed(reads, parsed.failed);
  const credentials = c.endpoints.map((e, i) => resolveUpstreamHeaders(e, `endpoints[${i}]`, env));
  const issues = [
    ...parsed.issues,
    ...(skip(["endpoints"]) ? [] : credentials.flatMap((r) => r.issues)),
    ...aliasIssues(env),
    ...crossFieldIssues(c, env, skip),
  ];
  if (issues.length > 0) throw configError(source, issues, origins);
  const scorers = effectiveScorers(c, withEnv);

  const deadlines = resolveDeadlines(BUILTIN_DEADLINES, c.deadlines);
  const bands = c.admission.bands.map((b) => ({ name: b.name, ceiling: b.ceiling, queueLimit: b.queue_limit, ttlMs: b.ttl_ms }));
  const authEnabled = c.auth.enabled ?? c.auth.keys.length > 0;
  c.auth.keys.forEach((k, i) => {
    if (k.key !== undefined) warnings.push(`auth.keys[${i}]: a plaintext key in the config; store key_sha256 (${sha256Hex(k.key)}) instead`);
  });
  // Keys may all be live ones (the keys API): auth on with none in the file is a deployment, not a mistake.
  if (authEnabled && c.auth.keys.length === 0)
    warnings.push("auth.enabled: true with no auth.keys: only live keys are accepted (llmgw ctl keys create); until one exists every request is a 401");
  if (!authEnabled) warnings.push("auth is OFF: no API keys are checked and every request is the anonymous tenant (for a trusted network only)");
  const config: Config = {
    listen: parseListen(c.listen),
    adminListen: parseListen(c.admin_listen),
    admin: toAdminConfig(c.admin, c.fleet.admin_token),
    metricsListen: c.metrics_listen === null ? null : parseListen(c.metrics_listen),
    logLevel: c.log_level,
    maxBodyBytes: c.max_body_bytes,
    maxAudioBytes: c.max_audio_bytes,
    maxResponseBytes: c.max_response_bytes,
    maxEndpoints: c.max_endpoints,
    bodyReadTimeoutMs: c.body_read_timeout_ms,
    maxOpenStreams: c.max_open_streams,
    deadlines,
    models: c.models.map((m) => ({
      name: m.name,
      aliases: m.aliases,
      fallback: m.fallback,
      deadlines: resolveDeadlines(deadlines, m.deadlines),
    })),
    endpoints: c.endpoints.map((e, i) => ({
      id: e.id,
      url: e.url.replace(/\/+$/, ""),
      models: e.models,
      modelsSource: e.models_source,
      pool: e.pool,
      engine: e.engine,
      gpuIds: e.gpu_ids,
      dcgmUrl: e.dcgm_url,
      kvEvents:
        e.kv_events === undefined
          ? undefined
          : { endpoint: e.kv_events.endpoint ?? null, replayEndpoint: e.kv_events.replay_endpoint ?? null, topic: e.kv_events.topic },
      ...(e.routes === undefined ? {} : { routes: e.routes }),
      upstreamHeaders: credentials[i]!.headers,
    })),
    scheduling: {
      filters: c.scheduling.filters,
      scorers,
      picker: c.scheduling.picker,
      prefixAffinity: {
        blockChars: c.scheduling.prefix_affinity.block_chars,
        maxBlocks: c.scheduling.prefix_affinity.max_blocks,
        lruEntries: c.scheduling.prefix_affinity.lru_entries,
      },
      cacheAffinity: {
        threshold: c.scheduling.cache_affinity.threshold,
        peakPrefillTokensPerS: c.scheduling.cache_affinity.peak_prefill_tokens_per_s,
        maxTtftPenaltyMs: c.scheduling.cache_affinity.max_ttft_penalty_ms,
      },
      // Several gateways share no estimate: each would send a prefix elsewhere. Rendezvous hashing agrees without sharing.
      preciseStandIn: c.state.backend === "redis" ? "prefix-rendezvous" : "prefix-affinity",
    },
    ...resolveKvEventsConfig(c),
    health: {
      pollIntervalMs: c.health.poll_interval_ms,
      timeoutMs: c.health.timeout_ms,
      staleAfterMs: c.health.stale_after_ms,
      timeoutsBeforeUnready: c.health.timeouts_before_unready,
    },
    retry: {
      maxAttempts: c.retry.max_attempts,
      budgetRatio: c.retry.budget_ratio,
      minPerS: c.retry.min_per_s,
      backoffMs: c.retry.backoff_ms,
      maxRetryAfterMs: c.retry.max_retry_after_ms,
      sameEndpoint: { ...c.retry.same_endpoint },
    },
    circuitBreaker: {
      failureThreshold: c.circuit_breaker.failure_threshold,
      openMs: c.circuit_breaker.open_ms,
      maxOpenMs: Math.max(c.circuit_breaker.open_ms, c.circuit_breaker.max_open_ms),
      probe: { enabled: c.circuit_breaker.probe.enabled, intervalMs: c.circuit_breaker.probe.interval_ms, timeoutMs: c.circuit_breaker.probe.timeout_ms },
    },
    continuation: {
      enabled: c.continuation.enabled,
      maxRecoveries: c.continuation.max_recoveries,
      offModels: c.models.filter((m) => !m.continuation).map((m) => m.name),
      offEndpoints: c.endpoints.filter((e) => !e.continuation).map((e) => e.id),
    },
    auth: {
      enabled: authEnabled,
      keys: c.auth.keys.map((k) => ({
        sha256: k.key_sha256 ?? sha256Hex(k.key ?? ""),
        tenant: k.tenant,
        maxBand: bands.findIndex((b) => b.name === (k.max_band ?? c.admission.default_band)),
      })),
    },
    tenants: c.tenants.map((t) => ({ name: t.name, requestsPerMinute: t.requests_per_minute, tokensPerMinute: t.tokens_per_minute })),
    admission: {
      enabled: c.admission.enabled,
      bands,
      defaultBand: bands.findIndex((b) => b.name === c.admission.default_band),
      fairness: c.admission.fairness,
      quantumTokens: c.admission.quantum_tokens,
      initialCapacity: c.admission.initial_capacity,
      headroom: c.admission.headroom,
      staleMetrics: c.admission.stale_metrics,
      fastPath: c.admission.fast_path,
      workConserving: c.admission.work_conserving,
      reserveWindowMs: c.admission.reserve_window_ms,
    },
    ...resolveJobsConfig(c, warnings),
    nodes: toNodeConfigs(c.nodes, env),
    fleet: toFleetConfig(c.fleet),
    ...resolveStateConfig(c),
    ...resolveTracingConfig(c.tracing, env),
    responses: resolveResponsesConfig(c.responses),
    warnings,
    // What is in effect where the wire form leaves a key to be derived: the deadlines, auth on or off, the scorers (max_open_streams stays in place for serve to size).
    document: {
      ...c,
      max_open_streams: c.max_open_streams,
      deadlines: {
        dial_ms: deadlines.dialMs,
        headers_ms: deadlines.headersMs,
        first_token_ms: deadlines.firstTokenMs,
        idle_ms: deadlines.idleMs,
        total_ms: deadlines.totalMs,
      },
      scheduling: { ...c.scheduling, scorers },
      auth: { ...c.auth, enabled: authEnabled },
    },
  };
  return deepFreeze(config);
}

/** The YAML document of `text` as a mapping of keys; syntax errors name the line and column. */
function parseDocument(text: string, source: string): Record<string, unknown> {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    if (err instanceof YAMLParseError) {
      const pos = err.linePos?.[0];
      throw new ConfigError(source, [`${pos ? `line ${pos.line}, column ${pos.col}: ` : ""}${err.message.split("\n")[0]}`]);
    }
    throw new ConfigError(source, [err instanceof Error ? err.message.split("\n")[0]! : String(err)]);
  }
  if (raw === null || raw === undefined) return {};
  if (typeof raw !== "object" || Array.isArray(raw)) throw new ConfigError(source, ["(root): expected a mapping of keys"]);
  return raw as Record<string, unknown>;
}

/** Parse YAML text into a Config; syntax errors name the line and column. */
export function parseConfigText(text: string, source: string, env: Record<string, string | undefined> = {}): Config {
  return buildConfig(parseDocument(text, source), env, source);
}

/**
 * The one way every command loads its configuration: the YAML file at `path`
 * (or none: defaults), then `edit` applies the command's flags to the raw
 * document (so they are validated with it and errors name their keys; it
 * records in `origins` which flag set which path), then LLMGW_* environment
 * overrides, defaults and validation.
 */
export function loadConfigFile(
  path: string | undefined,
  edit: (raw: Record<string, unknown>, origins: ConfigOrigins) => void = () => {},
  env: Record<string, string | undefined> = process.env,
  source = path ?? "flags",
): Config {
  let raw: Record<string, unknown> = {};
  if (path !== undefined) {
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (err) {
      throw new ConfigError(path, [`cannot read file: ${err instanceof Error ? err.message : String(err)}`]);
    }
    raw = parseDocument(text, path);
  }
  const origins: ConfigOrigins = new Map();
  edit(raw, origins);
  return buildConfig(raw, env, source, origins);
}
