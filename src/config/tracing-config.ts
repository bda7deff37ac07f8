/** The `tracing` block (OpenTelemetry traces over OTLP/HTTP) and how the standard OTEL_* variables fill what it leaves out. */
import { z } from "zod";
import * as D from "./defaults.ts";
import type { OtlpProtocol, TracingConfig } from "./types.ts";
import { httpUrl } from "./wire-primitives.ts";

const PROTOCOLS = ["http/protobuf", "http/json"] as const satisfies readonly OtlpProtocol[];

export const tracingSchema = z
  .object({
    /** Absent: on exactly when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (or `endpoint` is). */
    enabled: z.boolean().optional(),
    /** The full traces URL; absent: from the OTEL_* variables, else DEFAULT_TRACING_ENDPOINT. */
    endpoint: httpUrl.optional(),
    protocol: z.enum(PROTOCOLS).optional(),
    headers: z.record(z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, { message: "expected an HTTP header name" }), z.string()).optional(),
    service_name: z.string().min(1).max(256).optional(),
    /** Share of the traces started here that are sampled; a client's traceparent decides for its own trace. */
    sample_ratio: z.number().min(0).max(1).optional(),
    max_queue_spans: z.number().int().min(1).max(1_000_000).default(D.DEFAULT_TRACING_MAX_QUEUE_SPANS),
    max_batch_spans: z.number().int().min(1).max(100_000).default(D.DEFAULT_TRACING_MAX_BATCH_SPANS),
    export_interval_ms: z.number().int().min(10).max(600_000).default(D.DEFAULT_TRACING_EXPORT_INTERVAL_MS),
    export_timeout_ms: z.number().int().min(100).max(600_000).default(D.DEFAULT_TRACING_EXPORT_TIMEOUT_MS),
  })
  .strict();

export const TRACING_DEFAULTS = tracingSchema.parse({});

type Env = Record<string, string | undefined>;
type Wire = z.output<typeof tracingSchema>;

/** OTEL_EXPORTER_OTLP_HEADERS' form: `k=v,k2=v2`, values percent-encoded (OTel SDK environment variable spec). */
function parseOtelHeaders(text: string | undefined, name: string, issues: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  if (!text) return out;
  for (const part of text.split(",")) {
    if (part.trim() === "") continue;
    const eq = part.indexOf("=");
    const key = eq > 0 ? part.slice(0, eq).trim() : "";
    if (key === "") {
      issues.push(`${name}: expected key=value pairs separated by commas`);
      continue;
    }
    try {
      out[key.toLowerCase()] = decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      issues.push(`${name}: the value of '${key}' is not valid percent-encoding`);
    }
  }
  return out;
}

/** OTEL_TRACES_SAMPLER (+ _ARG) as a ratio and whether a parent's decision is followed. */
function envSampler(env: Env, issues: string[]): { ratio: number; parentBased: boolean } | undefined {
  const name = env.OTEL_TRACES_SAMPLER?.trim();
  if (!name) return undefined;
  const arg = env.OTEL_TRACES_SAMPLER_ARG;
  const ratio = () => {
    const r = arg === undefined || arg.trim() === "" ? 1 : Number(arg);
    if (Number.isFinite(r) && r >= 0 && r <= 1) return r;
    issues.push(`OTEL_TRACES_SAMPLER_ARG: expected a number in [0, 1], got '${arg}'`);
    return 1;
  };
  switch (name) {
    case "always_on":
      return { ratio: 1, parentBased: false };
    case "always_off":
      return { ratio: 0, parentBased: false };
    case "traceidratio":
      return { ratio: ratio(), parentBased: false };
    case "parentbased_always_on":
      return { ratio: 1, parentBased: true };
    case "parentbased_always_off":
      return { ratio: 0, parentBased: true };
    case "parentbased_traceidratio":
      return { ratio: ratio(), parentBased: true };
    default:
      issues.push(`OTEL_TRACES_SAMPLER: '${name}' is not one llmgw implements (always_on, always_off, traceidratio, parentbased_*)`);
      return undefined;
  }
}

function envProtocol(env: Env, issues: string[]): OtlpProtocol | undefined {
  for (const name of ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"]) {
    const v = env[name]?.trim();
    if (!v) continue;
    if ((PROTOCOLS as readonly string[]).includes(v)) return v as OtlpProtocol;
    issues.push(`${name}: '${v}' is not spoken by llmgw (http/protobuf or http/json; OTLP over gRPC is not)`);
    return undefined;
  }
  return undefined;
}

/** The traces URL the OTEL_* variables name: the per-signal one as it is, the general one with /v1/traces appended. */
function envEndpoint(env: Env): string | undefined {
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return traces;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!base) return undefined;
  return `${base.replace(/\/+$/, "")}/v1/traces`;
}

function envTimeoutMs(env: Env): number | undefined {
  const v = env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT ?? env.OTEL_EXPORTER_OTLP_TIMEOUT;
  const ms = v === undefined ? Number.NaN : Number(v);
  return Number.isInteger(ms) && ms > 0 ? ms : undefined;
}

/**
 * Tracing in effect, and what is wrong with the variables it read. Keys the
 * config sets win over the OTEL_* variables; the variables fill the rest.
 * Off when the config says `enabled: false`, when OTEL_SDK_DISABLED is
 * true, or when neither the config nor an OTLP endpoint variable asks for it.
 */
function resolve(t: Wire, env: Env): { tracing: TracingConfig | null; issues: string[] } {
  const issues: string[] = [];
  const fromEnv = envEndpoint(env);
  const disabled = env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true";
  const on = t.enabled ?? (t.endpoint !== undefined || fromEnv !== undefined);
  if (!on || disabled) return { tracing: null, issues };
  const endpoint = t.endpoint ?? fromEnv ?? D.DEFAULT_TRACING_ENDPOINT;
  if (t.endpoint === undefined && fromEnv !== undefined && !httpUrl.safeParse(fromEnv).success)
    issues.push(`OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT: expected an http:// or https:// URL, got '${fromEnv}'`);
  const protocol = t.protocol ?? envProtocol(env, issues) ?? "http/protobuf";
  const headers = {
    ...parseOtelHeaders(env.OTEL_EXPORTER_OTLP_HEADERS, "OTEL_EXPORTER_OTLP_HEADERS", issues),
    ...parseOtelHeaders(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", issues),
    ...t.headers,
  };
  const sampler = t.sample_ratio === undefined ? (envSampler(env, issues) ?? { ratio: 1, parentBased: true }) : { ratio: t.sample_ratio, parentBased: true };
  if (t.max_batch_spans > t.max_queue_spans) issues.push("tracing.max_batch_spans: expected at most tracing.max_queue_spans");
  return {
    tracing: {
      endpoint,
      protocol,
      headers,
      serviceName: t.service_name ?? (env.OTEL_SERVICE_NAME?.trim() || D.DEFAULT_TRACING_SERVICE_NAME),
      sampleRatio: sampler.ratio,
      parentBased: sampler.parentBased,
      maxQueueSpans: t.max_queue_spans,
      maxBatchSpans: t.max_batch_spans,
      exportIntervalMs: t.export_interval_ms,
      exportTimeoutMs: t.export_timeout_ms === D.DEFAULT_TRACING_EXPORT_TIMEOUT_MS ? (envTimeoutMs(env) ?? t.export_timeout_ms) : t.export_timeout_ms,
    },
    issues,
  };
}

export function tracingIssues(t: Wire, env: Env): string[] {
  return resolve(t, env).issues;
}

export function resolveTracingConfig(t: Wire, env: Env): { tracing: TracingConfig | null } {
  return { tracing: resolve(t, env).tracing };
}
