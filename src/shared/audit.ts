/**
 * The audit log's record: one JSON line per request, per batch, per cold
 * start of a model scaled to zero and per change the autoscaler makes to a
 * model's replica count, with a
 * stable, versioned schema (documented in the README, "Audit log schema").
 * Builders take plain inputs so every layer can produce a record without
 * importing the layers above it. Absent is null, never 0.
 */

import { logger } from "./logger.ts";

export const AUDIT_SCHEMA_VERSION = 1;

type AuditKind = "request" | "batch" | "cold_start" | "scale";

export interface AuditRecord {
  /** What the line is about; also the log message, so `grep '"msg":"audit"'` finds them all. */
  audit: AuditKind;
  v: typeof AUDIT_SCHEMA_VERSION;
  /** When it ended, ISO 8601 UTC. */
  ts: string;
  request_id: string | null;
  tenant: string;
  model: string | null;
  band: string | null;
  /** The API route ("/v1/chat/completions"); for a batch, its endpoint (the route its lines ran on). */
  route: string;
  /** The upstream endpoint (its id) that served the request, or the last one tried; null when no engine was reached (a batch: null, its lines name theirs). */
  endpoint: string | null;
  /** Whether the answer was an SSE stream; null for a batch. */
  stream: boolean | null;
  /** Requests sent to engines (retries included); null for a batch. */
  attempts: number | null;
  /** Requests: the `llmgw_requests_total` outcome (ok, client_error, …). Batches: the final status (completed, failed, cancelled, expired). */
  outcome: string;
  /** HTTP status sent to the client; null for a batch. */
  status: number | null;
  /** The stable llmgw error code, when it ended in one. */
  error_code: string | null;
  /** What went wrong, in words (null when nothing did). */
  error_message: string | null;
  tokens: { prompt: number | null; completion: number | null };
  durations_ms: { total: number; queue: number | null; ttft: number | null };
  /** Response cache: hit, miss, or null when the request was not cacheable. */
  cache: "hit" | "miss" | null;
  /** Answered by replaying an idempotent request's recorded response. */
  replay: boolean;
  /** The batch a request ran for, or the batch this line is about. */
  batch_id: string | null;
  /** Batches only: line counts at the end. */
  lines: { total: number; completed: number; failed: number } | null;
  /** Requests whose stream broke after its first byte: each break and how it was handled; null when none. */
  recoveries: readonly AuditRecovery[] | null;
  /** Requests: the models whose engines wrote the answer, in order (a fallback's, a continuation's on another model); null when none answered, and for a batch. */
  models: readonly string[] | null;
  /** Scale lines only: the desired replica count before and after, and the decision's reason; null on every other line. */
  scale: { from: number; to: number; reason: string } | null;
}

/** One break of a stream after its first byte. */
export interface AuditRecovery {
  /** cut, stall, engine_error, drained. */
  cause: string;
  /** The endpoint whose stream broke. */
  from: string | undefined;
  /** recovered, or why not (the llmgw_stream_recoveries_total result). */
  result: string;
  /** Where the continuation ran, and its model when a fallback took it. */
  to?: string;
  model?: string;
  /** Why it was not continued, in detail. */
  reason?: string;
}

interface RequestAuditInput {
  requestId?: string;
  tenant: string;
  model?: string;
  band?: string;
  route: string;
  endpoint?: string;
  stream?: boolean;
  attempts?: number;
  outcome: string;
  status: number;
  errorCode?: string;
  errorMessage?: string;
  promptTokens?: number;
  completionTokens?: number;
  startedAtMs: number;
  endedAtMs: number;
  queueMs?: number;
  ttftMs?: number;
  cache?: "hit" | "miss";
  replay?: boolean;
  batchId?: string;
  recoveries?: readonly AuditRecovery[];
  models?: readonly string[];
}

export function requestAuditRecord(i: RequestAuditInput): AuditRecord {
  return {
    audit: "request",
    v: AUDIT_SCHEMA_VERSION,
    ts: new Date(i.endedAtMs).toISOString(),
    request_id: i.requestId ?? null,
    tenant: i.tenant,
    model: i.model ?? null,
    band: i.band ?? null,
    route: i.route,
    endpoint: i.endpoint ?? null,
    stream: i.stream ?? false,
    attempts: i.attempts ?? 0,
    outcome: i.outcome,
    status: i.status,
    error_code: i.errorCode ?? null,
    error_message: i.errorMessage ?? null,
    tokens: { prompt: i.promptTokens ?? null, completion: i.completionTokens ?? null },
    durations_ms: { total: Math.max(0, i.endedAtMs - i.startedAtMs), queue: i.queueMs ?? null, ttft: i.ttftMs ?? null },
    cache: i.cache ?? null,
    replay: i.replay ?? false,
    batch_id: i.batchId ?? null,
    lines: null,
    recoveries: i.recoveries ?? null,
    models: i.models !== undefined && i.models.length > 0 ? [...i.models] : null,
    scale: null,
  };
}

/** What a batch audit line needs (a stored batch has all of it). */
interface BatchAuditInput {
  id: string;
  tenant: string;
  model: string | null;
  /** The batch's endpoint (a route). */
  endpoint: string;
  status: string;
  createdAtMs: number;
  inProgressAtMs: number | null;
  errors: readonly { code: string }[] | null;
  counts: { total: number; completed: number; failed: number; promptTokens: number; completionTokens: number };
}

/** Batches run in the batch band; their queue time is creation to in_progress (validation). */
export function batchAuditRecord(b: BatchAuditInput, endedAtMs: number, band = "batch"): AuditRecord {
  return {
    audit: "batch",
    v: AUDIT_SCHEMA_VERSION,
    ts: new Date(endedAtMs).toISOString(),
    request_id: null,
    tenant: b.tenant,
    model: b.model,
    band,
    route: b.endpoint,
    endpoint: null,
    stream: null,
    attempts: null,
    outcome: b.status,
    status: null,
    error_code: b.errors?.[0]?.code ?? null,
    error_message: null,
    tokens: { prompt: b.counts.promptTokens, completion: b.counts.completionTokens },
    durations_ms: { total: Math.max(0, endedAtMs - b.createdAtMs), queue: b.inProgressAtMs === null ? null : b.inProgressAtMs - b.createdAtMs, ttft: null },
    cache: null,
    replay: false,
    batch_id: b.id,
    lines: { total: b.counts.total, completed: b.counts.completed, failed: b.counts.failed },
    recoveries: null,
    models: null,
    scale: null,
  };
}

/** A cold start of a model scaled to zero, from the request that found it at zero to its first replica serving, or to the last waiting request giving up. */
interface ColdStartAuditInput {
  model: string;
  /** The request that found the model at zero. */
  requestId: string;
  tenant: string;
  route: string;
  startedAtMs: number;
  endedAtMs: number;
  /** `serving`: a replica serves; `unserved`: every waiting request gave up (deadline or client) first. */
  outcome: "serving" | "unserved";
  /** Requests that waited for it and then went on to admission, and those that gave up (deadline, client gone, too many waiting). */
  served: number;
  gaveUp: number;
}

/** Cold starts: outcome serving or unserved, total the time it took or was waited; `lines` the requests that waited: completed went on, failed gave up. */
export function coldStartAuditRecord(c: ColdStartAuditInput): AuditRecord {
  return {
    audit: "cold_start",
    v: AUDIT_SCHEMA_VERSION,
    ts: new Date(c.endedAtMs).toISOString(),
    request_id: c.requestId,
    tenant: c.tenant,
    model: c.model,
    band: null,
    route: c.route,
    endpoint: null,
    stream: null,
    attempts: null,
    outcome: c.outcome,
    status: null,
    error_code: null,
    error_message: null,
    tokens: { prompt: null, completion: null },
    durations_ms: { total: Math.max(0, c.endedAtMs - c.startedAtMs), queue: null, ttft: null },
    cache: null,
    replay: false,
    batch_id: null,
    lines: { total: c.served + c.gaveUp, completed: c.served, failed: c.gaveUp },
    recoveries: null,
    models: null,
    scale: null,
  };
}

/** A change of a model's desired count by the autoscaler: outcome is the decision's reason, tenant "system", route "autoscaler". */
export function scaleAuditRecord(s: { model: string; from: number; to: number; reason: string; atMs: number }): AuditRecord {
  return {
    audit: "scale",
    v: AUDIT_SCHEMA_VERSION,
    ts: new Date(s.atMs).toISOString(),
    request_id: null,
    tenant: "system",
    model: s.model,
    band: null,
    route: "autoscaler",
    endpoint: null,
    stream: null,
    attempts: null,
    outcome: s.reason,
    status: null,
    error_code: null,
    error_message: null,
    tokens: { prompt: null, completion: null },
    durations_ms: { total: 0, queue: null, ttft: null },
    cache: null,
    replay: false,
    batch_id: null,
    lines: null,
    recoveries: null,
    models: null,
    scale: { from: s.from, to: s.to, reason: s.reason },
  };
}

/** Write the record to the log as `"msg":"audit"` (pino adds level, time, pid and role around the schema's fields). */
export function writeAudit(r: AuditRecord): void {
  logger().info(r, "audit");
}
