/**
 * The JobsStore contract as one suite, run against every backend (bun:sqlite
 * and Redis): tenant isolation, pagination, compare-and-set, claims with
 * leases, results recorded once.
 */
import { describe, expect, test } from "bun:test";
import { type BatchDoc, type BatchLine, type LineResult, newBatchDoc, type StoredFile } from "../../src/jobs/job-types.ts";
import { type JobsStore, UnknownCursorError } from "../../src/jobs/jobs-store.ts";

/** An in-progress batch of model "m" created at t = 1 s; `extra` overrides any field. */
export function batchDoc(id: string, tenant: string, extra: Partial<BatchDoc> = {}): BatchDoc {
  const base = newBatchDoc({
    id,
    tenant,
    endpoint: "/v1/chat/completions",
    model: "m",
    inputFileId: "file-in",
    completionWindow: "24h",
    createdAtMs: 1_000,
    expiresAtMs: 1_000 + 86_400_000,
    metadata: null,
  });
  return { ...base, status: "in_progress", inProgressAtMs: 1_000, ...extra };
}

export function lines(n: number): BatchLine[] {
  return Array.from({ length: n }, (_, i) => ({
    lineNo: i + 1,
    customId: `c${i + 1}`,
    method: "POST" as const,
    url: "/v1/chat/completions" as const,
    body: `{"model":"m","n":${i + 1}}`,
  }));
}

export function okResult(extra: Partial<LineResult> = {}): LineResult {
  return {
    ok: true,
    statusCode: 200,
    body: '{"object":"chat.completion"}',
    requestId: "r",
    errorCode: null,
    errorMessage: null,
    promptTokens: 3,
    completionTokens: 2,
    ...extra,
  };
}

function file(id: string, tenant: string, createdAtMs = 1): StoredFile {
  return { id, tenant, filename: `${id}.jsonl`, purpose: "batch", bytes: 3, createdAtMs, endpoint: "/v1/chat/completions", model: "m", lineCount: 1 };
}

/** Store a file with these bytes, written through the store's content writer in two chunks. */
export async function putBytes(s: JobsStore, f: StoredFile, bytes: Uint8Array): Promise<void> {
  const w = await s.openContent(f.id);
  await w.write(bytes.subarray(0, 1));
  await w.write(bytes.subarray(1));
  await s.putFile({ ...f, bytes: w.bytes }, w);
}

/** A stored file's bytes as text (undefined when the tenant has no such file). */
export async function contentText(s: JobsStore, tenant: string, id: string): Promise<string | undefined> {
  const c = await s.getFileContent(tenant, id);
  return c === undefined ? undefined : await new Response(c.body).text();
}

/** Every line outcome of a batch, read in pages of 2. */
async function allOutcomes(s: JobsStore, batchId: string) {
  const out = [];
  for (let after = 0; ; ) {
    const page = await s.lineOutcomes(batchId, after, 2);
    if (page.length === 0) return out;
    out.push(...page);
    after = page.at(-1)!.lineNo;
  }
}

/** Each backend says how to damage a batch's stored record (invalid JSON where its document is). */
let corrupt: (s: JobsStore, batchId: string) => Promise<void> = async () => {};

export function jobsStoreContract(backend: string, open: () => JobsStore, corruptRecord: (s: JobsStore, batchId: string) => Promise<void>): void {
  corrupt = corruptRecord;
  describe(`JobsStore contract: ${backend}`, () => {
    test("files: put, get, content, list by tenant with cursor and order, delete", async () => {
      const s = open();
      for (const id of ["f1", "f2", "f3"]) await putBytes(s, file(id, "a"), new TextEncoder().encode(id));
      await putBytes(s, file("g1", "b"), new Uint8Array([1, 2]));
      expect((await s.getFile("a", "f2"))?.filename).toBe("f2.jsonl");
      expect(await s.getFile("b", "f2")).toBeUndefined();
      expect(await contentText(s, "a", "f3")).toBe("f3");
      expect((await s.getFileContent("a", "f3"))?.size).toBe(2);
      expect(await s.getFileContent("b", "f3")).toBeUndefined();
      expect(await s.usage("a")).toEqual({ bytes: 6, files: 3 });
      const desc = await s.listFiles("a", { limit: 2, order: "desc" });
      expect(desc.items.map((f) => f.id)).toEqual(["f3", "f2"]);
      expect(desc.hasMore).toBe(true);
      expect((await s.listFiles("a", { limit: 2, order: "desc", after: "f2" })).items.map((f) => f.id)).toEqual(["f1"]);
      expect((await s.listFiles("a", { limit: 5, order: "asc", after: "f1" })).items.map((f) => f.id)).toEqual(["f2", "f3"]);
      await expect(s.listFiles("a", { limit: 5, order: "asc", after: "g1" })).rejects.toBeInstanceOf(UnknownCursorError);
      expect(await s.deleteFile("b", "f1")).toBe(false);
      expect(await s.deleteFile("a", "f1")).toBe(true);
      expect(await s.getFile("a", "f1")).toBeUndefined();
      expect(await s.getFileContent("a", "f1")).toBeUndefined();
      expect(await s.usage("a")).toEqual({ bytes: 4, files: 2 });
      expect(await s.usage("b")).toEqual({ bytes: 2, files: 1 });
    });

    test("file bytes: large content streams back whole, a replaced file keeps one copy, an aborted write leaves nothing", async () => {
      const s = open();
      const big = new Uint8Array(2_500_000).map((_, i) => i % 251);
      const w = await s.openContent("big");
      for (let off = 0; off < big.length; off += 300_000) await w.write(big.subarray(off, off + 300_000));
      await s.putFile({ ...file("big", "a"), bytes: w.bytes }, w);
      const back = new Uint8Array(await new Response((await s.getFileContent("a", "big"))!.body).arrayBuffer());
      expect(back.length).toBe(big.length);
      expect(Buffer.compare(back, big)).toBe(0);
      await putBytes(s, { ...file("big", "a") }, new TextEncoder().encode("small"));
      expect(await contentText(s, "a", "big")).toBe("small");
      expect(await s.usage("a")).toEqual({ bytes: 5, files: 1 });
      const dropped = await s.openContent("never");
      await dropped.write(new Uint8Array(10));
      await dropped.abort();
      expect(await s.getFile("a", "never")).toBeUndefined();
    });

    test("batches: created whole, listed newest first per tenant, compare-and-set updates", async () => {
      const s = open();
      await s.createBatch(batchDoc("b1", "a"), [lines(2), lines(3).slice(2)]);
      await s.createBatch(batchDoc("b2", "a", { status: "validating" }), [lines(1)]);
      await s.createBatch(batchDoc("b3", "other"), [lines(1)]);
      const got = await s.getBatch("a", "b1");
      expect(got?.counts).toEqual({ total: 3, completed: 0, failed: 0, promptTokens: 0, completionTokens: 0 });
      expect(await s.getBatch("other", "b1")).toBeUndefined();
      const page = await s.listBatches("a", { limit: 1 });
      expect(page.items.map((b) => b.id)).toEqual(["b2"]);
      expect(page.hasMore).toBe(true);
      expect((await s.listBatches("a", { limit: 5, after: "b2" })).items.map((b) => b.id)).toEqual(["b1"]);
      expect((await s.activeBatches()).map((b) => b.id)).toEqual(["b1", "b2", "b3"]);
      expect(await s.updateBatch("b1", ["validating"], { status: "cancelling" })).toBeUndefined();
      const cancelling = await s.updateBatch("b1", ["in_progress"], { status: "cancelling", cancellingAtMs: 5 });
      expect(cancelling).toMatchObject({ status: "cancelling", cancellingAtMs: 5, counts: { total: 3 } });
      await s.updateBatch("b1", ["cancelling"], { status: "cancelled" });
      expect((await s.activeBatches()).map((b) => b.id)).toEqual(["b2", "b3"]);
    });

    test("claims: lowest lines first, never twice while leased, lapsed leases are re-claimed, releases back off", async () => {
      const s = open();
      await s.createBatch(batchDoc("b", "a"), [lines(5)]);
      const first = await s.claimLines("b", 2, "r1", 100, 1_100);
      expect(first.map((l) => [l.lineNo, l.customId, l.attempts])).toEqual([
        [1, "c1", 0],
        [2, "c2", 0],
      ]);
      expect(first[0]!.body).toBe('{"model":"m","n":1}');
      expect((await s.claimLines("b", 10, "r2", 200, 1_200)).map((l) => l.lineNo)).toEqual([3, 4, 5]);
      expect(await s.claimLines("b", 10, "r2", 300, 1_300)).toEqual([]);
      // r1 renews; r2's leases lapse at 1,200 and another runner takes its lines.
      await s.renewLeases("r1", 5_000);
      expect((await s.claimLines("b", 10, "r3", 1_250, 9_000)).map((l) => l.lineNo)).toEqual([3, 4, 5]);
      await s.releaseLine("b", 1, "r1", 2_000, true);
      await s.releaseLine("b", 3, "r2", 0, true); // r2 lost the line: its release changes nothing
      expect(await s.claimLines("b", 10, "r4", 1_500, 9_000)).toEqual([]);
      const again = await s.claimLines("b", 10, "r4", 2_000, 9_000);
      expect(again.map((l) => [l.lineNo, l.attempts])).toEqual([[1, 1]]);
    });

    test("results are recorded once per (batch, line), counted once, and listed for the output files", async () => {
      const s = open();
      await s.createBatch(batchDoc("b", "a"), [lines(4)]);
      await s.claimLines("b", 4, "r1", 0, 1_000);
      expect(await s.recordResults("b", [{ lineNo: 1, result: okResult() }])).toEqual([true]);
      // Several at once, one of them a second answer for line 1: it is ignored, the others are recorded and counted.
      const failed = okResult({ ok: false, statusCode: 400, promptTokens: 0, completionTokens: 0 });
      expect(
        await s.recordResults("b", [
          { lineNo: 1, result: okResult({ body: '{"second":true}' }) },
          { lineNo: 2, result: failed },
        ]),
      ).toEqual([false, true]);
      expect(await s.recordResults("b", [])).toEqual([]);
      expect((await s.getBatch("a", "b"))?.counts).toEqual({ total: 4, completed: 1, failed: 1, promptTokens: 3, completionTokens: 2 });
      expect(await s.recordResults("b", [{ lineNo: 4, result: okResult() }])).toEqual([true]);
      expect((await s.getBatch("a", "b"))?.counts).toEqual({ total: 4, completed: 2, failed: 1, promptTokens: 6, completionTokens: 4 });
      // A recorded line is never claimed again, even after a reclaim (embedded) or once the leases have lapsed (shared).
      await s.reclaimInFlight();
      expect((await s.claimLines("b", 4, "r2", 2_000, 3_000)).map((l) => l.lineNo)).toEqual([3]);
      const outcomes = await allOutcomes(s, "b");
      expect(outcomes.map((o) => [o.lineNo, o.customId, o.result?.statusCode ?? null])).toEqual([
        [1, "c1", 200],
        [2, "c2", 400],
        [3, "c3", null],
        [4, "c4", 200],
      ]);
      expect(outcomes[0]!.result!.body).toBe('{"object":"chat.completion"}');
    });

    test("a batch whose creation did not finish is never visible; one whose record is corrupt fails alone", async () => {
      const s = open();
      async function* failing() {
        yield lines(2);
        throw new Error("the input could not be read");
      }
      await expect(s.createBatch(batchDoc("half", "a"), failing())).rejects.toThrow("could not be read");
      expect(await s.getBatch("a", "half")).toBeUndefined();
      expect((await s.activeBatches()).map((b) => b.id)).not.toContain("half");
      await s.createBatch(batchDoc("good", "a"), [lines(1)]);
      await s.createBatch(batchDoc("bad", "a"), [lines(1)]);
      await corrupt(s, "bad");
      expect((await s.activeBatches()).map((b) => b.id)).toEqual(["good"]);
      const bad = await s.getBatch("a", "bad");
      expect(bad).toMatchObject({ id: "bad", status: "failed", errors: [{ code: "batch_record_corrupt" }] });
      expect((await s.activeBatches()).map((b) => b.id)).toEqual(["good"]);
    });
  });
}
