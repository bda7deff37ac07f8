/** The audit record: every schema field present in a fixed order, absent values null (never 0), batches summarised from their counts, cold starts and autoscaling changes in the same shape. */
import { expect, test } from "bun:test";
import { AUDIT_SCHEMA_VERSION, batchAuditRecord, coldStartAuditRecord, requestAuditRecord, scaleAuditRecord } from "../../src/shared/audit.ts";

const FIELDS = [
  "audit",
  "v",
  "ts",
  "request_id",
  "tenant",
  "model",
  "band",
  "route",
  "endpoint",
  "stream",
  "attempts",
  "outcome",
  "status",
  "error_code",
  "error_message",
  "tokens",
  "durations_ms",
  "cache",
  "replay",
  "batch_id",
  "lines",
  "recoveries",
  "models",
  "scale",
];

test("a request record: fields in schema order, unknowns null, durations from start and end", () => {
  const minimal = requestAuditRecord({
    tenant: "t",
    route: "/v1/chat/completions",
    outcome: "rejected",
    status: 429,
    errorCode: "GPU_SATURATED",
    startedAtMs: 1_000,
    endedAtMs: 1_004,
  });
  expect(Object.keys(minimal)).toEqual(FIELDS);
  expect(minimal).toMatchObject({
    audit: "request",
    v: AUDIT_SCHEMA_VERSION,
    ts: "1970-01-01T00:00:01.004Z",
    request_id: null,
    model: null,
    route: "/v1/chat/completions",
    endpoint: null, // no engine was reached
    attempts: 0,
    error_code: "GPU_SATURATED",
    error_message: null,
    tokens: { prompt: null, completion: null },
    durations_ms: { total: 4, queue: null, ttft: null },
    cache: null,
    replay: false,
    batch_id: null,
    lines: null,
    models: null, // no engine wrote
  });
  const full = requestAuditRecord({
    requestId: "r1",
    tenant: "t",
    model: "m",
    band: "batch",
    route: "/v1/chat/completions",
    endpoint: "engine-2",
    stream: true,
    attempts: 2,
    outcome: "ok",
    status: 200,
    promptTokens: 0,
    completionTokens: 7,
    startedAtMs: 0,
    endedAtMs: 50,
    queueMs: 3,
    ttftMs: 12,
    cache: "hit",
    replay: true,
    batchId: "batch_1",
    models: ["m", "m-fallback"],
  });
  expect(full).toMatchObject({
    models: ["m", "m-fallback"],
    endpoint: "engine-2",
    stream: true,
    attempts: 2,
    tokens: { prompt: 0, completion: 7 },
    durations_ms: { total: 50, queue: 3, ttft: 12 },
    cache: "hit",
    replay: true,
    batch_id: "batch_1",
    band: "batch",
  });
  expect(JSON.parse(JSON.stringify(full))).toEqual(full);
});

test("a batch record: final status as outcome, line counts, tokens and the first error code", () => {
  const r = batchAuditRecord(
    {
      id: "batch_1",
      tenant: "t",
      model: "m",
      endpoint: "/v1/embeddings",
      status: "failed",
      createdAtMs: 10_000,
      inProgressAtMs: null,
      errors: [{ code: "model_not_found" }],
      counts: { total: 3, completed: 0, failed: 0, promptTokens: 0, completionTokens: 0 },
    },
    12_500,
  );
  expect(Object.keys(r)).toEqual(FIELDS);
  expect(r).toMatchObject({
    audit: "batch",
    outcome: "failed",
    band: "batch",
    route: "/v1/embeddings",
    endpoint: null,
    stream: null,
    attempts: null,
    status: null,
    error_code: "model_not_found",
    batch_id: "batch_1",
    durations_ms: { total: 2_500, queue: null, ttft: null },
    lines: { total: 3, completed: 0, failed: 0 },
  });
});

test("a cold start and an autoscaling change: the same fields, their own kinds", () => {
  const c = coldStartAuditRecord({
    model: "m",
    requestId: "r1",
    tenant: "t",
    route: "/v1/chat/completions",
    startedAtMs: 1_000,
    endedAtMs: 3_500,
    outcome: "serving",
    served: 3,
    gaveUp: 1,
  });
  expect(Object.keys(c)).toEqual(FIELDS);
  expect(c).toMatchObject({
    audit: "cold_start",
    request_id: "r1",
    model: "m",
    outcome: "serving",
    durations_ms: { total: 2_500, queue: null, ttft: null },
    lines: { total: 4, completed: 3, failed: 1 },
    scale: null,
  });
  const s = scaleAuditRecord({ model: "m", from: 2, to: 3, reason: "forecast", atMs: 0 });
  expect(Object.keys(s)).toEqual(FIELDS);
  expect(s).toMatchObject({ audit: "scale", tenant: "system", route: "autoscaler", outcome: "forecast", scale: { from: 2, to: 3, reason: "forecast" } });
});
