/**
 * The Files and Batches store on Redis, shared by every gateway: any gateway
 * may drive any batch. Batch lines are a work queue with visibility timeouts
 * (a claimed line moves from `pending` to `running` with a lease end; a line
 * whose runner died is claimed again once its lease ends), and a result is
 * written once per (batch, line) and counted in the same atomic step. The key
 * layout and the scripts are in redis-jobs-scripts.ts.
 */
import { corruptBatch } from "../jobs/corrupt-batch.ts";
import {
  ACTIVE_STATUSES,
  type Batch,
  type BatchDoc,
  type BatchLine,
  type BatchStatus,
  type ClaimedLine,
  type LineOutcome,
  type LineRecord,
  type LineResult,
  type StoredFile,
} from "../jobs/job-types.ts";
import { type ContentWriter, type FileContent, type JobsStore, type Page, type PageQuery, type StorageUsage, UnknownCursorError } from "../jobs/jobs-store.ts";
import { logger } from "../shared/logger.ts";
import { blobStream, dropBlob, RedisContentWriter } from "./redis-blobs.ts";
import type { RedisConnection } from "./redis-connection.ts";
import {
  ADD_LINES,
  CLAIM_LINES,
  CREATE_BATCH,
  DELETE_FILE,
  LIST_PAGE,
  PUT_FILE,
  RECORD_RESULT,
  RELEASE_LINE,
  RENEW_LEASES,
  UPDATE_BATCH,
} from "./redis-jobs-scripts.ts";

/** A compare-and-set that keeps losing to other writers gives up after this many reads (it never should). */
const MAX_CAS_TRIES = 50;

type Hash = Record<string, string>;

function asHash(v: unknown): Hash | undefined {
  if (v === null || v === undefined) return undefined;
  if (Array.isArray(v)) {
    if (v.length === 0) return undefined;
    const h: Hash = {};
    for (let i = 0; i + 1 < v.length; i += 2) h[String(v[i])] = String(v[i + 1]);
    return h;
  }
  const h = v as Hash;
  return Object.keys(h).length === 0 ? undefined : h;
}

/** The batch a hash holds; a document that cannot be read is shown as a failed batch saying so (activeBatches fails it for good). */
function toBatch(id: string, h: Hash): Batch {
  const counts = {
    total: Number(h.total),
    completed: Number(h.completed),
    failed: Number(h.failed),
    promptTokens: Number(h.pt),
    completionTokens: Number(h.ct),
  };
  try {
    const doc = JSON.parse(h.doc ?? "") as BatchDoc;
    if (typeof doc !== "object" || doc === null || doc.id !== id) throw new Error("the document does not describe this batch");
    return { ...doc, counts };
  } catch (err) {
    return { ...corruptBatch(id, h.tenant ?? "", err, Date.now()), counts };
  }
}

interface LineJson {
  c: string;
  u: ClaimedLine["url"];
  b: string;
}

export class RedisJobsStore implements JobsStore {
  readonly #r: RedisConnection;
  readonly #p: string;

  /** `prefix`: state.key_prefix (with its trailing separator). */
  constructor(redis: RedisConnection, prefix: string) {
    this.#r = redis;
    this.#p = `${prefix}jobs:`;
  }

  #file(id: string): string {
    return `${this.#p}file:${id}`;
  }
  #batch(id: string, part = ""): string {
    return `${this.#p}batch:${id}${part}`;
  }
  #owner(owner: string): string {
    return `${this.#p}owner:${owner}`;
  }

  async openContent(id: string): Promise<ContentWriter> {
    return new RedisContentWriter(this.#r, `${this.#p}blob:`, id);
  }

  async putFile(file: StoredFile, content: ContentWriter): Promise<void> {
    if (!(content instanceof RedisContentWriter) || content.fileId !== file.id)
      throw new Error(`file ${file.id}: its bytes were not written through this store`);
    // The chunks first, kept for good: a file whose metadata is visible always has its bytes.
    await content.finish();
    const keys = [this.#file(file.id), `${this.#p}files:${file.tenant}`, `${this.#p}seq`, `${this.#p}usage:${file.tenant}`];
    const [oldBlob, oldChunks] = (await this.#r.eval(PUT_FILE, keys, [
      file.tenant,
      file.purpose,
      JSON.stringify(file),
      file.id,
      content.blob,
      content.chunks,
      content.bytes,
    ])) as [string, string | number];
    if (oldBlob !== "" && oldBlob !== content.blob) await dropBlob(this.#r, `${this.#p}blob:`, oldBlob, Number(oldChunks));
  }

  async getFile(tenant: string, id: string): Promise<StoredFile | undefined> {
    const [owner, meta] = (await this.#r.send("HMGET", [this.#file(id), "tenant", "meta"])) as (string | null)[];
    return owner === tenant && meta ? (JSON.parse(meta) as StoredFile) : undefined;
  }

  async getFileContent(tenant: string, id: string): Promise<FileContent | undefined> {
    const [owner, blob, chunks, bytes] = (await this.#r.send("HMGET", [this.#file(id), "tenant", "blob", "chunks", "bytes"])) as (string | null)[];
    if (owner !== tenant || !blob) return undefined;
    return { size: Number(bytes), body: blobStream(this.#r, `${this.#p}blob:`, blob, Number(chunks)) };
  }

  async deleteFile(tenant: string, id: string): Promise<boolean> {
    const out = (await this.#r.eval(DELETE_FILE, [this.#file(id), `${this.#p}files:${tenant}`, `${this.#p}usage:${tenant}`], [tenant, id])) as [
      number,
      string?,
      (string | number)?,
    ];
    if (Number(out[0]) !== 1) return false;
    if (out[1]) await dropBlob(this.#r, `${this.#p}blob:`, out[1], Number(out[2]));
    return true;
  }

  async usage(tenant: string): Promise<StorageUsage> {
    const [bytes, files] = (await this.#r.send("HMGET", [`${this.#p}usage:${tenant}`, "bytes", "files"])) as (string | null)[];
    return { bytes: Number(bytes ?? 0), files: Number(files ?? 0) };
  }

  async listFiles(tenant: string, q: PageQuery & { order: "asc" | "desc"; purpose?: string }): Promise<Page<StoredFile>> {
    const ids = await this.#page(
      `${this.#p}files:${tenant}`,
      q.after,
      q.limit + 1,
      q.order,
      `${this.#p}file:`,
      q.purpose === undefined ? "" : "purpose",
      q.purpose ?? "",
    );
    const metas = await Promise.all(ids.slice(0, q.limit).map((id) => this.#r.send("HGET", [this.#file(id), "meta"]) as Promise<string | null>));
    return { items: metas.flatMap((m) => (m ? [JSON.parse(m) as StoredFile] : [])), hasMore: ids.length > q.limit };
  }

  async #page(
    index: string,
    after: string | undefined,
    want: number,
    order: "asc" | "desc",
    recordPrefix: string,
    field: string,
    value: string,
  ): Promise<string[]> {
    const out = await this.#r.eval(LIST_PAGE, [index], [after ?? "", want, order, recordPrefix, field, value]);
    if (out === -1) throw new UnknownCursorError(after ?? "");
    return (out as string[] | null) ?? [];
  }

  async createBatch(doc: BatchDoc, chunks: AsyncIterable<readonly BatchLine[]> | Iterable<readonly BatchLine[]>): Promise<Batch> {
    const b = (part: string) => this.#batch(doc.id, part);
    let total = 0;
    // Lines first, a chunk per script; no batch hash names them until the last step.
    for await (const lines of chunks) {
      const args: (string | number)[] = [];
      for (const l of lines) args.push(l.lineNo, JSON.stringify({ c: l.customId, u: l.url, b: l.body } satisfies LineJson), l.customId);
      if (args.length > 0) await this.#r.eval(ADD_LINES, [b(":lines"), b(":pending"), b(":cids")], args);
      total += lines.length;
    }
    const keys = [this.#batch(doc.id), `${this.#p}batches:${doc.tenant}`, `${this.#p}batches:active`, `${this.#p}seq`];
    await this.#r.eval(CREATE_BATCH, keys, [doc.id, doc.tenant, doc.status, JSON.stringify(doc), total, ACTIVE_STATUSES.includes(doc.status) ? 1 : 0]);
    return { ...doc, counts: { total, completed: 0, failed: 0, promptTokens: 0, completionTokens: 0 } };
  }

  async #read(id: string): Promise<Hash | undefined> {
    return asHash(await this.#r.send("HGETALL", [this.#batch(id)]));
  }

  async getBatch(tenant: string, id: string): Promise<Batch | undefined> {
    const h = await this.#read(id);
    return h !== undefined && h.tenant === tenant ? toBatch(id, h) : undefined;
  }

  async listBatches(tenant: string, q: PageQuery): Promise<Page<Batch>> {
    const ids = await this.#page(`${this.#p}batches:${tenant}`, q.after, q.limit + 1, "desc", "", "", "");
    const page = ids.slice(0, q.limit);
    const hashes = await Promise.all(page.map((id) => this.#read(id)));
    return { items: hashes.flatMap((h, i) => (h ? [toBatch(page[i]!, h)] : [])), hasMore: ids.length > q.limit };
  }

  async activeBatches(): Promise<Batch[]> {
    const ids = (await this.#r.send("ZRANGE", [`${this.#p}batches:active`, "0", "-1"])) as string[];
    const hashes = await Promise.all(ids.map((id) => this.#read(id)));
    const out: Batch[] = [];
    for (const [i, h] of hashes.entries()) {
      if (h === undefined) continue;
      const b = toBatch(ids[i]!, h);
      if (b.status !== "failed") {
        out.push(b);
        continue;
      }
      // A document that cannot be read: this batch fails, the others run.
      logger().error({ batch: ids[i], tenant: h.tenant, err: b.errors?.[0]?.message }, "a batch record is corrupt: the batch is failed");
      const { counts: _, ...doc } = b;
      await this.#r.eval(UPDATE_BATCH, [this.#batch(ids[i]!), `${this.#p}batches:active`], [h.ver ?? "0", "failed", JSON.stringify(doc), 0, ids[i]!]);
    }
    return out;
  }

  async updateBatch(id: string, from: readonly BatchStatus[], patch: Partial<Omit<BatchDoc, "id" | "tenant">>): Promise<Batch | undefined> {
    for (let i = 0; i < MAX_CAS_TRIES; i++) {
      const h = await this.#read(id);
      if (h === undefined) return undefined;
      const current = toBatch(id, h);
      if (!from.includes(current.status)) return undefined;
      const { counts, ...doc } = { ...current, ...patch };
      const active = ACTIVE_STATUSES.includes(doc.status) ? 1 : 0;
      const done = Number(
        await this.#r.eval(UPDATE_BATCH, [this.#batch(id), `${this.#p}batches:active`], [h.ver ?? "0", doc.status, JSON.stringify(doc), active, id]),
      );
      if (done === -1) return undefined;
      if (done === 1) return { ...doc, counts };
    }
    throw new Error(`batch ${id}: the update kept losing to concurrent writers`);
  }

  async claimLines(batchId: string, max: number, owner: string, nowMs: number, leaseUntilMs: number): Promise<ClaimedLine[]> {
    if (max <= 0) return [];
    const b = (part: string) => this.#batch(batchId, part);
    const flat = (await this.#r.eval(
      CLAIM_LINES,
      [b(":pending"), b(":running"), b(":owner"), b(":attempts"), b(":lines"), this.#owner(owner)],
      [max, owner, nowMs, leaseUntilMs, batchId],
    )) as string[];
    const out: ClaimedLine[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3) {
      const line = JSON.parse(flat[i + 1]!) as LineJson;
      out.push({ batchId, lineNo: Number(flat[i]), customId: line.c, method: "POST", url: line.u, body: line.b, attempts: Number(flat[i + 2]) });
    }
    return out;
  }

  async renewLeases(owner: string, leaseUntilMs: number): Promise<void> {
    await this.#r.eval(RENEW_LEASES, [this.#owner(owner)], [owner, leaseUntilMs, this.#p]);
  }

  async releaseLine(batchId: string, lineNo: number, owner: string, notBeforeMs: number, failedAttempt: boolean): Promise<void> {
    const b = (part: string) => this.#batch(batchId, part);
    await this.#r.eval(
      RELEASE_LINE,
      [b(":pending"), b(":running"), b(":owner"), b(":attempts"), this.#owner(owner)],
      [lineNo, owner, notBeforeMs, failedAttempt ? 1 : 0, batchId],
    );
  }

  async recordResults(batchId: string, records: readonly LineRecord[]): Promise<boolean[]> {
    const b = (part: string) => this.#batch(batchId, part);
    const keys = [b(":results"), b(":pending"), b(":running"), b(":owner"), b(""), b(":lines")];
    // One script a line (each records and counts its line atomically); the client pipelines them.
    const recorded = records.map(({ lineNo, result: res }) =>
      this.#r.eval(RECORD_RESULT, keys, [lineNo, JSON.stringify(res), res.ok ? 1 : 0, res.promptTokens, res.completionTokens]),
    );
    return (await Promise.all(recorded)).map((r) => Number(r) === 1);
  }

  /** Nothing to do: a line whose runner died is claimed again when its lease ends (any gateway may be driving it now). */
  async reclaimInFlight(): Promise<number> {
    return 0;
  }

  async lineOutcomes(batchId: string, afterLineNo: number, limit: number): Promise<LineOutcome[]> {
    const total = Number(await this.#r.send("HGET", [this.#batch(batchId), "total"]));
    const nos: string[] = [];
    for (let n = afterLineNo + 1; n <= Math.min(total, afterLineNo + limit); n++) nos.push(String(n));
    if (nos.length === 0) return [];
    const [cids, results] = (await Promise.all([
      this.#r.send("HMGET", [this.#batch(batchId, ":cids"), ...nos]),
      this.#r.send("HMGET", [this.#batch(batchId, ":results"), ...nos]),
    ])) as (string | null)[][];
    return nos.map((no, i) => ({ lineNo: Number(no), customId: cids![i] ?? "", result: results![i] ? (JSON.parse(results![i]!) as LineResult) : null }));
  }
}
