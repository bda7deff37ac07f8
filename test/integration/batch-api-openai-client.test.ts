/**
 * The real `openai` npm client against the Files and Batches routes served by
 * a tiny Bun.serve in this test (the handler the gateway mounts), with a
 * batch runner whose `send` goes to a real sim-engine: a 1,000-line batch
 * completes with every custom_id exactly once; bad files are refused naming
 * the line with nothing stored; tenants never see each other's ids; lists
 * paginate as OpenAI's do.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI, { toFile } from "openai";
import { BatchRunner } from "../../src/jobs/batch-runner.ts";
import { handleIdempotently, IdempotencyGate, REPLAY_HEADER } from "../../src/jobs/idempotency-gate.ts";
import { SqliteIdempotencyStore } from "../../src/jobs/idempotency-store.ts";
import { createJobsRoutes } from "../../src/jobs/jobs-routes.ts";
import { SqliteJobsStore } from "../../src/jobs/sqlite-jobs-store.ts";
import { filesDirOf, openStateDatabase } from "../../src/jobs/state-db.ts";
import type { AuditRecord } from "../../src/shared/audit.ts";
import { asLlmgwError, errorResponse } from "../../src/shared/errors.ts";
import { chatBatchJsonl, engineSend } from "../helpers/batch-send.ts";
import { type Sim, startSim } from "../helpers/cluster.ts";
import { routesDeps } from "../helpers/jobs-routes-deps.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const MODEL = "sim-model";
const MAX_FILE_BYTES = 512 * 1024;

let sim: Sim;
let dataDir: string;
let runner: BatchRunner;
let server: ReturnType<typeof Bun.serve>;
const audits: AuditRecord[] = [];

/** The SDK as one tenant: the test server reads the tenant from the bearer token. */
function clientFor(tenant: string): OpenAI {
  return new OpenAI({ baseURL: `${server.url.href}v1`, apiKey: tenant, maxRetries: 0 });
}

beforeAll(async () => {
  sim = await startSim(["--model", MODEL, "--itl-ms", "1", "--prefill-overhead-ms", "1"]);
  dataDir = mkdtempSync(join(tmpdir(), "llmgw-batch-api-"));
  const db = openStateDatabase(dataDir);
  const store = new SqliteJobsStore(db, filesDirOf(dataDir));
  const gate = new IdempotencyGate(new SqliteIdempotencyStore(db), { ttlMs: 3_600_000, waitMs: 1_000, maxResponseBytes: 1024 * 1024 }, { lockMs: 60_000 });
  runner = new BatchRunner({
    store,
    send: engineSend(sim.api),
    limits: { concurrencyPerBatch: 16, concurrencyPerTenant: 32, maxAttempts: 3, retryBackoffMs: 50, leaseMs: 30_000 },
    reclaimOnStart: true,
    tickMs: 50,
    audit: (r) => audits.push(r),
  });
  await runner.start();
  const handle = createJobsRoutes(
    routesDeps({ store, knownModel: (m) => m === MODEL, limits: { maxFileBytes: MAX_FILE_BYTES, maxLines: 5_000 }, runner, idempotency: gate }),
  );
  server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const tenant = (req.headers.get("authorization") ?? "").replace(/^Bearer /, "");
      try {
        // The gateway's order: auth → quota → idempotent replay → the route.
        const res = await handleIdempotently(
          gate,
          req,
          tenant,
          MAX_FILE_BYTES + 65_536,
          async (r) => (await handle(r, { tenant })) ?? new Response("not a jobs route", { status: 404 }),
        );
        return res;
      } catch (err) {
        return errorResponse(asLlmgwError(err));
      }
    },
  });
});

afterAll(async () => {
  await runner?.stop();
  server?.stop(true);
  await stopAll();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

async function upload(client: OpenAI, text: string, name = "batch.jsonl") {
  return client.files.create({ file: await toFile(Buffer.from(text), name), purpose: "batch" });
}

async function waitForStatus(client: OpenAI, id: string, status: string, timeoutMs = 60_000) {
  return waitUntil(
    async () => {
      const b = await client.batches.retrieve(id);
      return b.status === status ? b : undefined;
    },
    { timeoutMs, intervalMs: 100, what: `batch ${id} ${status}` },
  );
}

describe("Batch and Files API with the openai client", () => {
  test("a 1,000-line batch: upload, create, poll, download; every custom_id exactly once", async () => {
    const client = clientFor("tenant-a");
    const before = Number((await sim.state()).requests_total);
    const file = await upload(client, chatBatchJsonl(1000, MODEL));
    expect(file).toMatchObject({ object: "file", purpose: "batch", filename: "batch.jsonl", status: "processed" });
    const created = await client.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
      metadata: { run: "nightly" },
    });
    expect(created.status).toBe("validating");
    expect(created.request_counts).toEqual({ total: 1000, completed: 0, failed: 0 });
    expect(created.expires_at! - created.created_at).toBe(24 * 3600);

    const done = await waitForStatus(client, created.id, "completed");
    expect(done.request_counts).toEqual({ total: 1000, completed: 1000, failed: 0 });
    expect(done.metadata).toEqual({ run: "nightly" });
    expect(done.error_file_id ?? null).toBeNull();
    for (const k of ["in_progress_at", "finalizing_at", "completed_at"] as const) expect(done[k]).toBeGreaterThanOrEqual(done.created_at);

    const text = await (await client.files.content(done.output_file_id!)).text();
    const lines = text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { id: string; custom_id: string; response: { status_code: number; body: { object: string } }; error: null });
    expect(lines.length).toBe(1000);
    expect(new Set(lines.map((l) => l.custom_id)).size).toBe(1000);
    expect(new Set(lines.map((l) => l.id)).size).toBe(1000);
    for (let i = 0; i < 1000; i++) expect(lines.some((l) => l.custom_id === `req-${i}`)).toBe(true);
    expect(lines.every((l) => l.response.status_code === 200 && l.response.body.object === "chat.completion" && l.error === null)).toBe(true);
    const output = await client.files.retrieve(done.output_file_id!);
    expect(output.purpose).toBe("batch_output");
    // The engine saw each line once: nothing was lost or sent twice.
    expect(Number((await sim.state()).requests_total) - before).toBe(1000);
    expect(audits.find((a) => a.batch_id === created.id)).toMatchObject({
      audit: "batch",
      outcome: "completed",
      tenant: "tenant-a",
      lines: { total: 1000, completed: 1000, failed: 0 },
    });
  }, 120_000);

  test("bad files are refused naming the line, and nothing is stored", async () => {
    const client = clientFor("tenant-bad");
    const good = (i: number, extra: Record<string, unknown> = {}) =>
      JSON.stringify({
        custom_id: `c${i}`,
        method: "POST",
        url: "/v1/chat/completions",
        body: { model: MODEL, messages: [{ role: "user", content: "x" }] },
        ...extra,
      });
    const cases: [string, RegExp][] = [
      [`${good(1)}\n${good(2)}\n{"custom_id": "c3", "method": "POST",\n`, /^line 3: not valid JSON/],
      [`${good(1)}\n${good(2)}\n${good(1)}\n`, /^line 3: duplicate custom_id 'c1' \(first on line 1\)/],
      [`${good(1)}\n${good(2, { body: { model: "no-such-model", messages: [] } })}\n`, /^line 2: unknown model 'no-such-model'/],
      [`${good(1)}\n${good(2, { url: "/v1/embeddings", body: { model: MODEL, input: "x" } })}\n`, /^line 2: url '\/v1\/embeddings' differs from line 1's/],
      [`${good(1)}\n\n${good(2)}\n`, /^line 2: empty line/],
    ];
    for (const [text, message] of cases) {
      const err = await upload(client, text).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      const e = err as InstanceType<typeof OpenAI.BadRequestError>;
      expect(e.code).toBe("INVALID_BATCH_LINE");
      expect((e.error as { message: string }).message).toMatch(message);
    }
    const tooBig = await upload(client, good(1).padEnd(MAX_FILE_BYTES + 10, " ")).catch((e: unknown) => e);
    expect((tooBig as InstanceType<typeof OpenAI.APIError>).status).toBe(413);
    const purpose = await client.files.create({ file: await toFile(Buffer.from(good(1)), "x.jsonl"), purpose: "fine-tune" }).catch((e: unknown) => e);
    expect((purpose as InstanceType<typeof OpenAI.APIError>).status).toBe(400);

    // A file for one endpoint cannot start a batch for another; no batch appears.
    const file = await upload(client, `${good(1)}\n`);
    const wrong = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/embeddings", completion_window: "24h" }).catch((e: unknown) => e);
    expect((wrong as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
    expect(((wrong as InstanceType<typeof OpenAI.APIError>).error as { message: string }).message).toMatch(
      /^line 1: url '\/v1\/chat\/completions' is not the batch's endpoint/,
    );
    const files = await client.files.list();
    expect(files.data.map((f) => f.id)).toEqual([file.id]);
    expect((await client.batches.list()).data).toEqual([]);
  });

  test("another tenant's file and batch are 404, as if they did not exist", async () => {
    const a = clientFor("tenant-iso-a");
    const b = clientFor("tenant-iso-b");
    const file = await upload(a, chatBatchJsonl(2, MODEL));
    const batch = await a.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    for (const call of [
      () => b.files.retrieve(file.id),
      () => b.files.content(file.id),
      () => b.files.delete(file.id),
      () => b.batches.retrieve(batch.id),
      () => b.batches.cancel(batch.id),
    ]) {
      expect(await call().catch((e: unknown) => e)).toBeInstanceOf(OpenAI.NotFoundError);
    }
    const reuse = await b.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" }).catch((e: unknown) => e);
    expect(reuse).toBeInstanceOf(OpenAI.NotFoundError);
    expect((await b.batches.list()).data).toEqual([]);
    await waitForStatus(a, batch.id, "completed");
    // Cancelling a finished batch is refused.
    expect(((await a.batches.cancel(batch.id).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>).status).toBe(409);
    expect(await a.files.delete(file.id)).toEqual({ id: file.id, object: "file", deleted: true });
    expect(await a.files.retrieve(file.id).catch((e: unknown) => e)).toBeInstanceOf(OpenAI.NotFoundError);
  });

  test("batch creation with an Idempotency-Key creates one batch; a retry gets the same one, another body a 422", async () => {
    const client = clientFor("tenant-idem");
    const file = await upload(client, chatBatchJsonl(3, MODEL));
    // The SDK sends no Idempotency-Key of its own (its idempotencyHeader is unset), so the test names one.
    const params = { input_file_id: file.id, endpoint: "/v1/chat/completions" as const, completion_window: "24h" as const };
    const first = await client.batches.create(params, { headers: { "Idempotency-Key": "create-1" } }).withResponse();
    const retry = await client.batches.create(params, { headers: { "Idempotency-Key": "create-1" } }).withResponse();
    expect(retry.data.id).toBe(first.data.id);
    expect(retry.response.headers.get(REPLAY_HEADER)).toBe("true");
    expect(first.response.headers.get(REPLAY_HEADER)).toBeNull();
    expect((await client.batches.list()).data.map((b) => b.id)).toEqual([first.data.id]);
    const other = await client.batches.create({ ...params, metadata: { x: "y" } }, { headers: { "Idempotency-Key": "create-1" } }).catch((e: unknown) => e);
    expect(other).toBeInstanceOf(OpenAI.UnprocessableEntityError);
    await waitForStatus(client, first.data.id, "completed");
  });

  test("batch lists paginate newest first with after, limit and has_more", async () => {
    const client = clientFor("tenant-pages");
    const file = await upload(client, chatBatchJsonl(1, MODEL));
    const ids: string[] = [];
    for (let i = 0; i < 5; i++)
      ids.push((await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" })).id);
    const first = await client.batches.list({ limit: 2 });
    expect(first.data.map((b) => b.id)).toEqual([ids[4]!, ids[3]!]);
    expect(first.has_more).toBe(true);
    const second = await client.batches.list({ limit: 2, after: ids[3]! });
    expect(second.data.map((b) => b.id)).toEqual([ids[2]!, ids[1]!]);
    const all: string[] = [];
    for await (const b of client.batches.list({ limit: 2 })) all.push(b.id);
    expect(all).toEqual([...ids].reverse());
    const bad = await client.batches.list({ limit: 101 }).catch((e: unknown) => e);
    expect((bad as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
  });
});
