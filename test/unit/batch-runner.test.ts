/** The batch runner over the sqlite store with a scripted `send`: concurrency bounds, saturation waits, retries, cancel, expiry, late results. */
import { Database } from "bun:sqlite";
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BatchRunner, type SendLine, type SendResult } from "../../src/jobs/batch-runner.ts";
import { SqliteJobsStore } from "../../src/jobs/sqlite-jobs-store.ts";
import type { AuditRecord } from "../../src/shared/audit.ts";
import { batchDoc, contentText, lines } from "../helpers/jobs-store-contract.ts";

const root = mkdtempSync(join(tmpdir(), "llmgw-runner-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const filesDir = () => join(root, `files-${dirs++}`);

import { waitUntil } from "../helpers/processes.ts";

const OK: SendResult = { status: 200, body: JSON.stringify({ object: "chat.completion", usage: { prompt_tokens: 4, completion_tokens: 2 } }) };
/** An OpenAI error answer, as JSON text. */
const errorAnswer = (status: number, code: string, type: string, message = code): SendResult => ({
  status,
  body: JSON.stringify({ error: { message, type, param: null, code } }),
});
const LIMITS = { concurrencyPerBatch: 4, concurrencyPerTenant: 8, maxAttempts: 3, retryBackoffMs: 5, leaseMs: 60_000 };

const runners: BatchRunner[] = [];
afterEach(async () => {
  await Promise.all(runners.splice(0).map((r) => r.stop()));
});

function setup(
  send: SendLine,
  opts: { limits?: Partial<typeof LIMITS>; saturated?: () => boolean; now?: () => number; knownModel?: (m: string) => boolean } = {},
) {
  const store = new SqliteJobsStore(new Database(":memory:", { strict: true }), filesDir());
  const audits: AuditRecord[] = [];
  const make = (owner: string, reclaimOnStart = false) => {
    const r = new BatchRunner({
      store,
      send,
      limits: { ...LIMITS, ...opts.limits },
      saturated: opts.saturated,
      now: opts.now,
      knownModel: opts.knownModel,
      tickMs: 10,
      owner,
      reclaimOnStart,
      audit: (a) => audits.push(a),
    });
    runners.push(r);
    return r;
  };
  return { store, audits, runner: make("r1"), make };
}

/** A batch created now (batchDoc's fixed times are long past, so the runner would expire it). */
function fresh(id: string, tenant: string, extra: Parameters<typeof batchDoc>[2] = {}) {
  const now = Date.now();
  return batchDoc(id, tenant, { createdAtMs: now, inProgressAtMs: now, expiresAtMs: now + 86_400_000, ...extra });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function finished(store: SqliteJobsStore, tenant: string, id: string, status = "completed") {
  return waitUntil(
    async () => {
      const b = await store.getBatch(tenant, id);
      return b?.status === status ? b : undefined;
    },
    { timeoutMs: 10_000, intervalMs: 10, what: `${id} ${status}` },
  );
}

async function fileText(store: SqliteJobsStore, tenant: string, id: string | null): Promise<string[]> {
  if (id === null) return [];
  return (await contentText(store, tenant, id))!.trim().split("\n");
}

describe("batch runner", () => {
  test("concurrency is bounded per batch and per tenant, and one tenant does not starve another", async () => {
    const active = new Map<string, number>();
    const peak = new Map<string, number>();
    const bump = (k: string, d: number) => {
      const v = (active.get(k) ?? 0) + d;
      active.set(k, v);
      peak.set(k, Math.max(peak.get(k) ?? 0, v));
    };
    const { store, runner } = setup(
      async (_l, _s, meta) => {
        bump(meta.batchId, 1);
        bump(meta.tenant, 1);
        await sleep(3);
        bump(meta.batchId, -1);
        bump(meta.tenant, -1);
        return OK;
      },
      { limits: { concurrencyPerBatch: 3, concurrencyPerTenant: 4 } },
    );
    await store.createBatch(fresh("a1", "A", { status: "validating", inProgressAtMs: null }), [lines(20)]);
    await store.createBatch(fresh("a2", "A"), [lines(20)]);
    await store.createBatch(fresh("b1", "B"), [lines(20)]);
    await runner.start();
    for (const [t, id] of [
      ["A", "a1"],
      ["A", "a2"],
      ["B", "b1"],
    ] as const)
      expect((await finished(store, t, id)).counts.completed).toBe(20);
    expect(Math.max(peak.get("a1")!, peak.get("a2")!, peak.get("b1")!)).toBe(3);
    expect(peak.get("A")).toBe(4);
    expect(peak.get("B")).toBe(3);
  });

  test("under GPU saturation pending lines wait and the batch says why; when it clears they run and nothing failed", async () => {
    let saturated = true;
    let sent = 0;
    const { store, runner } = setup(async () => (sent++, OK), { saturated: () => saturated });
    await store.createBatch(fresh("b", "t"), [lines(10)]);
    await runner.start();
    const waiting = await waitUntil(
      async () => {
        const b = await store.getBatch("t", "b");
        return b?.waitingReason === "gpu_saturated" ? b : undefined;
      },
      { what: "waiting reason" },
    );
    expect(waiting.status).toBe("in_progress");
    await sleep(50);
    expect(sent).toBe(0);
    saturated = false;
    const done = await finished(store, "t", "b");
    expect(done.counts).toMatchObject({ completed: 10, failed: 0, promptTokens: 40, completionTokens: 20 });
    expect(done.waitingReason).toBeNull();
  });

  test("a 429 GPU_SATURATED from send puts the line back without spending an attempt", async () => {
    let refusals = 0;
    const reasons = new Set<string | null>();
    const { store, runner } = setup(
      async () => {
        if (refusals < 12) {
          refusals++;
          return { ...errorAnswer(429, "GPU_SATURATED", "rate_limit_error", "saturated"), retryAfterS: 0.01 };
        }
        return OK;
      },
      { limits: { maxAttempts: 1 } },
    );
    await store.createBatch(fresh("b", "t"), [lines(6)]);
    await runner.start();
    const poll = setInterval(async () => reasons.add((await store.getBatch("t", "b"))?.waitingReason ?? null), 2);
    const done = await finished(store, "t", "b");
    clearInterval(poll);
    expect(done.counts).toMatchObject({ completed: 6, failed: 0 });
    expect(reasons.has("gpu_saturated")).toBe(true);
    expect(runner.lineStats).toEqual({ completed: 6, failed: 0, retried: 0, waited: 12 });
  });

  test("engine 5xx and transport failures are retried up to max_attempts, 4xx are recorded at once; all land in the error file", async () => {
    const calls = new Map<string, number>();
    const { store, runner } = setup(async (line, _s, meta) => {
      calls.set(meta.customId, (calls.get(meta.customId) ?? 0) + 1);
      const n = (JSON.parse(line.body) as { n: number }).n;
      if (n === 1) return errorAnswer(500, "UPSTREAM_ERROR", "server_error", "boom");
      if (n === 2) return errorAnswer(400, "INVALID_REQUEST", "invalid_request_error", "bad");
      if (n === 3) throw new Error("connection reset");
      if (n === 4 && calls.get(meta.customId) === 1) return errorAnswer(503, "NO_READY_ENDPOINT", "service_unavailable_error", "none");
      return OK;
    });
    await store.createBatch(fresh("b", "t"), [lines(5)]);
    await runner.start();
    const done = await finished(store, "t", "b");
    expect(done.counts).toMatchObject({ completed: 2, failed: 3 });
    expect([calls.get("c1"), calls.get("c2"), calls.get("c3"), calls.get("c4"), calls.get("c5")]).toEqual([3, 1, 3, 2, 1]);
    // c4's 503 NO_READY_ENDPOINT is a wait, not an attempt.
    expect(runner.lineStats).toEqual({ completed: 2, failed: 3, retried: 4, waited: 1 });
    expect(runner.waitStats).toMatchObject({ engine_error: 4, no_ready_endpoint: 1 });
    const errors = (await fileText(store, "t", done.errorFileId)).map(
      (l) => JSON.parse(l) as { custom_id: string; response: { status_code: number } | null; error: { code: string } | null },
    );
    expect(errors.map((e) => [e.custom_id, e.response?.status_code ?? null, e.error?.code ?? null])).toEqual([
      ["c1", 500, null],
      ["c2", 400, null],
      ["c3", null, "request_failed"],
    ]);
    expect((await fileText(store, "t", done.outputFileId)).length).toBe(2);
  });

  test("no ready endpoint, a model not yet discovered, an unreachable engine: lines wait past max_attempts and every line ends once", async () => {
    const refuse = (status: number, code: string): SendResult => errorAnswer(status, code, "service_unavailable_error");
    const answers = [
      refuse(503, "NO_READY_ENDPOINT"),
      refuse(404, "MODEL_NOT_FOUND"),
      refuse(502, "UPSTREAM_CONNECT_FAILED"),
      refuse(429, "GPU_SATURATED"),
      refuse(503, "ADMISSION_QUEUE_FULL"),
    ];
    let refused = 0;
    const calls = new Map<string, number>();
    const { store, runner } = setup(
      async (_l, _s, meta) => {
        calls.set(meta.customId, (calls.get(meta.customId) ?? 0) + 1);
        if (refused < 25) return answers[refused++ % answers.length]!;
        return OK;
      },
      { limits: { maxAttempts: 1, retryBackoffMs: 1 } },
    );
    await store.createBatch(fresh("b", "t"), [lines(6)]);
    await runner.start();
    const done = await finished(store, "t", "b");
    expect(done.counts).toMatchObject({ total: 6, completed: 6, failed: 0 });
    expect(runner.lineStats).toEqual({ completed: 6, failed: 0, retried: 0, waited: 25 });
    expect(runner.waitStats).toMatchObject({ no_ready_endpoint: 15, gpu_saturated: 5, queue_full: 5, engine_error: 0 });
    const out = (await fileText(store, "t", done.outputFileId)).map((l) => (JSON.parse(l) as { custom_id: string }).custom_id);
    expect(out.sort()).toEqual(["c1", "c2", "c3", "c4", "c5", "c6"]);
    expect(done.errorFileId).toBeNull();
  });

  test("nothing is claimed before whenReady resolves (the gateway has discovered what it serves)", async () => {
    let sent = 0;
    let ready: () => void = () => {};
    const store = new SqliteJobsStore(new Database(":memory:", { strict: true }), filesDir());
    const runner = new BatchRunner({
      store,
      send: async () => (sent++, OK),
      limits: LIMITS,
      tickMs: 10,
      audit: () => {},
      whenReady: () => new Promise<void>((r) => (ready = r)),
    });
    runners.push(runner);
    await store.createBatch(fresh("b", "t"), [lines(3)]);
    const started = runner.start();
    await sleep(60);
    expect(sent).toBe(0);
    ready();
    await started;
    expect((await finished(store, "t", "b")).counts.completed).toBe(3);
  });

  test("cancel: lines in flight finish and keep their results, the rest never run", async () => {
    const held: (() => void)[] = [];
    let sent = 0;
    const { store, runner, audits } = setup(
      async () => {
        sent++;
        await new Promise<void>((r) => held.push(r));
        return OK;
      },
      { limits: { concurrencyPerBatch: 2 } },
    );
    await store.createBatch(fresh("b", "t"), [lines(8)]);
    await runner.start();
    await waitUntil(() => held.length === 2, { what: "two lines in flight" });
    await store.updateBatch("b", ["in_progress"], { status: "cancelling", cancellingAtMs: 5 });
    runner.wake();
    await sleep(30);
    expect((await store.getBatch("t", "b"))?.status).toBe("cancelling");
    for (const release of held) release();
    const done = await finished(store, "t", "b", "cancelled");
    expect(sent).toBe(2);
    expect(done.counts).toMatchObject({ completed: 2, failed: 0 });
    expect((await fileText(store, "t", done.outputFileId)).length).toBe(2);
    const errors = await fileText(store, "t", done.errorFileId);
    expect(errors.length).toBe(6);
    expect(errors.every((l) => (JSON.parse(l) as { error: { code: string } }).error.code === "batch_cancelled")).toBe(true);
    expect(audits.at(-1)).toMatchObject({ audit: "batch", batch_id: "b", outcome: "cancelled" });
  });

  test("expiry: unfinished lines are cancelled, finished ones are in the output, the rest are batch_expired", async () => {
    let now = 10_000;
    let first = true;
    const { store, runner } = setup(
      async (_l, signal) => {
        if (first) return ((first = false), OK);
        await new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
        return OK;
      },
      { now: () => now, limits: { concurrencyPerBatch: 1 } },
    );
    await store.createBatch(fresh("b", "t", { expiresAtMs: 20_000 }), [lines(4)]);
    await runner.start();
    await waitUntil(async () => (await store.getBatch("t", "b"))?.counts.completed === 1, { what: "one line done" });
    now = 20_000;
    const done = await finished(store, "t", "b", "expired");
    expect(done.expiredAtMs).toBe(20_000);
    expect((await fileText(store, "t", done.outputFileId)).length).toBe(1);
    const errors = await fileText(store, "t", done.errorFileId);
    expect(errors.map((l) => (JSON.parse(l) as { custom_id: string; error: { code: string } }).error.code)).toEqual([
      "batch_expired",
      "batch_expired",
      "batch_expired",
    ]);
  });

  test("a batch whose model is gone when validation runs fails with the line named", async () => {
    const { store, runner, audits } = setup(async () => OK, { knownModel: () => false });
    await store.createBatch(fresh("b", "t", { status: "validating", inProgressAtMs: null }), [lines(2)]);
    await runner.start();
    const failed = await finished(store, "t", "b", "failed");
    expect(failed.errors).toEqual([{ code: "model_not_found", message: "The model 'm' is not served by this gateway.", param: "body.model", line: 1 }]);
    expect(audits[0]).toMatchObject({ outcome: "failed", error_code: "model_not_found" });
  });

  test("a restarted runner re-drives lines in flight; a late answer from the old one is not recorded twice", async () => {
    const held: ((r: SendResult) => void)[] = [];
    let calls = 0;
    const { store, runner, make } = setup(
      async () => {
        calls++;
        if (calls <= 3) return new Promise<SendResult>((r) => held.push(r));
        return OK;
      },
      { limits: { concurrencyPerBatch: 3 } },
    );
    await store.createBatch(fresh("b", "t"), [lines(5)]);
    await runner.start();
    await waitUntil(() => held.length === 3, { what: "three lines in flight" });
    const second = make("r2", true);
    await second.start();
    const done = await finished(store, "t", "b");
    expect(done.counts.completed).toBe(5);
    // The old runner's next pass (every 10 ms here) sees the batch ended and drops the line it had claimed ahead.
    await sleep(50);
    for (const release of held) release(OK);
    await sleep(30);
    expect((await store.getBatch("t", "b"))?.counts).toMatchObject({ completed: 5, failed: 0 });
    expect(calls).toBe(8);
  });

  test("lines that end together have their results written in one store call, and their slots refilled with one claim", async () => {
    const held: (() => void)[] = [];
    const store = new SqliteJobsStore(new Database(":memory:", { strict: true }), filesDir());
    const calls = { claimLines: 0, recordResults: [] as number[] };
    const counted = new Proxy(store, {
      get(target, key) {
        if (key === "claimLines") calls.claimLines++;
        const value: unknown = Reflect.get(target, key);
        if (key === "recordResults")
          return (id: string, records: readonly unknown[]) => (
            calls.recordResults.push(records.length), target.recordResults(id, records as Parameters<SqliteJobsStore["recordResults"]>[1])
          );
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const send: SendLine = (_l, signal) =>
      new Promise<SendResult>((resolve, reject) => {
        held.push(() => resolve(OK));
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
      });
    const runner = new BatchRunner({
      store: counted,
      send,
      limits: { ...LIMITS, concurrencyPerBatch: 8, concurrencyPerTenant: 8 },
      tickMs: 10_000,
      resultFlushMs: 80,
      audit: () => {},
    });
    runners.push(runner);
    await store.createBatch(fresh("b", "t"), [lines(40)]);
    await runner.start();
    await waitUntil(() => held.length === 8, { what: "eight lines in flight" });
    expect(calls.claimLines).toBe(1); // the eight, and two ahead
    for (const release of held.splice(0)) release();
    await waitUntil(() => held.length === 8, { what: "the next eight in flight" });
    // Two slots went straight to the lines held ahead, the other six came with one claim (and two more ahead).
    expect(calls.claimLines).toBe(2);
    expect(calls.recordResults).toEqual([]);
    await waitUntil(() => calls.recordResults.length > 0, { what: "the results written" });
    expect(calls.recordResults).toEqual([8]);
    expect((await store.getBatch("t", "b"))?.counts).toMatchObject({ completed: 8, failed: 0 });
  });

  test("a stopped runner writes the results it holds and gives back the lines it claimed ahead", async () => {
    const held: (() => void)[] = [];
    const store = new SqliteJobsStore(new Database(":memory:", { strict: true }), filesDir());
    // Lines answer when released, or fail when the runner aborts them (as the gateway's request path does).
    const send: SendLine = (_l, signal) =>
      new Promise<SendResult>((resolve, reject) => {
        held.push(() => resolve(OK));
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
      });
    const slow = new BatchRunner({
      store,
      send,
      limits: { ...LIMITS, concurrencyPerBatch: 4 },
      tickMs: 10_000,
      resultFlushMs: 60_000,
      owner: "slow",
      audit: () => {},
    });
    runners.push(slow);
    await store.createBatch(fresh("b", "t"), [lines(10)]);
    await slow.start();
    await waitUntil(() => held.length === 4, { what: "four lines in flight" });
    for (const release of held.splice(0, 2)) release();
    await waitUntil(() => held.length === 4, { what: "two more lines in flight" });
    // Lines 1-4 ran first, 5 (claimed ahead) and 6 took the two slots; 7 is claimed ahead.
    expect((await store.getBatch("t", "b"))?.counts.completed).toBe(0); // held for a minute
    await slow.stop();
    // The two results are written; the four aborted lines and the one claimed ahead are pending again, none with an attempt spent.
    expect((await store.getBatch("t", "b"))?.counts).toMatchObject({ completed: 2, failed: 0 });
    const again = await store.claimLines("b", 10, "next", Date.now(), Date.now() + 60_000);
    expect(again.map((l) => [l.lineNo, l.attempts])).toEqual([3, 4, 5, 6, 7, 8, 9, 10].map((n) => [n, 0]));
  });
});
