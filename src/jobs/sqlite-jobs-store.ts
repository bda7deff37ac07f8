/** The embedded JobsStore: files, batches and batch lines in bun:sqlite (one process per data directory). */
import type { Database } from "bun:sqlite";
import type { Batch, BatchDoc, BatchLine, BatchStatus, ClaimedLine, FilePurpose, LineOutcome, LineResult, StoredFile } from "./job-types.ts";
import { ACTIVE_STATUSES } from "./job-types.ts";
import { UnknownCursorError, type JobsStore, type Page, type PageQuery } from "./jobs-store.ts";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS files (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  tenant TEXT NOT NULL,
  filename TEXT NOT NULL,
  purpose TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  created_at_ms INTEGER NOT NULL,
  endpoint TEXT,
  model TEXT,
  line_count INTEGER NOT NULL,
  content BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS files_by_tenant ON files (tenant, seq);
CREATE TABLE IF NOT EXISTS batches (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  tenant TEXT NOT NULL,
  status TEXT NOT NULL,
  doc TEXT NOT NULL,
  total INTEGER NOT NULL,
  completed INTEGER NOT NULL DEFAULT 0,
  failed INTEGER NOT NULL DEFAULT 0,
  prompt_tokens INTEGER NOT NULL DEFAULT 0,
  completion_tokens INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS batches_by_tenant ON batches (tenant, seq);
CREATE INDEX IF NOT EXISTS batches_by_status ON batches (status, seq);
CREATE TABLE IF NOT EXISTS batch_lines (
  batch_id TEXT NOT NULL,
  line_no INTEGER NOT NULL,
  custom_id TEXT NOT NULL,
  url TEXT NOT NULL,
  body TEXT NOT NULL,
  state TEXT NOT NULL DEFAULT 'pending',
  attempts INTEGER NOT NULL DEFAULT 0,
  not_before_ms INTEGER NOT NULL DEFAULT 0,
  owner TEXT,
  lease_until_ms INTEGER NOT NULL DEFAULT 0,
  ok INTEGER,
  status_code INTEGER,
  result_body TEXT,
  request_id TEXT,
  error_code TEXT,
  error_message TEXT,
  prompt_tokens INTEGER NOT NULL DEFAULT 0,
  completion_tokens INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (batch_id, line_no)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS batch_lines_by_state ON batch_lines (batch_id, state, line_no);
`;

interface FileRow {
  id: string;
  tenant: string;
  filename: string;
  purpose: string;
  bytes: number;
  created_at_ms: number;
  endpoint: string | null;
  model: string | null;
  line_count: number;
}

interface BatchRow {
  doc: string;
  total: number;
  completed: number;
  failed: number;
  prompt_tokens: number;
  completion_tokens: number;
}

interface LineRow {
  batch_id: string;
  line_no: number;
  custom_id: string;
  url: string;
  body: string;
  state: string;
  attempts: number;
  ok: number | null;
  status_code: number | null;
  result_body: string | null;
  request_id: string | null;
  error_code: string | null;
  error_message: string | null;
  prompt_tokens: number;
  completion_tokens: number;
}

const FILE_COLUMNS = "id, tenant, filename, purpose, bytes, created_at_ms, endpoint, model, line_count";
const BATCH_COLUMNS = "doc, total, completed, failed, prompt_tokens, completion_tokens";

function toFile(r: FileRow): StoredFile {
  return {
    id: r.id,
    tenant: r.tenant,
    filename: r.filename,
    purpose: r.purpose as FilePurpose,
    bytes: r.bytes,
    createdAtMs: r.created_at_ms,
    endpoint: r.endpoint,
    model: r.model,
    lineCount: r.line_count,
  };
}

function toBatch(r: BatchRow): Batch {
  const doc = JSON.parse(r.doc) as BatchDoc;
  return {
    ...doc,
    counts: { total: r.total, completed: r.completed, failed: r.failed, promptTokens: r.prompt_tokens, completionTokens: r.completion_tokens },
  };
}

function toResult(r: LineRow): LineResult {
  return {
    ok: r.ok === 1,
    statusCode: r.status_code,
    body: r.result_body,
    requestId: r.request_id,
    errorCode: r.error_code,
    errorMessage: r.error_message,
    promptTokens: r.prompt_tokens,
    completionTokens: r.completion_tokens,
  };
}

export class SqliteJobsStore implements JobsStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
    db.run(SCHEMA);
  }

  async putFile(file: StoredFile, content: Uint8Array): Promise<void> {
    this.#db
      .query(
        `INSERT INTO files (${FILE_COLUMNS}, content) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET bytes = excluded.bytes, line_count = excluded.line_count, content = excluded.content`,
      )
      .run(file.id, file.tenant, file.filename, file.purpose, file.bytes, file.createdAtMs, file.endpoint, file.model, file.lineCount, content);
  }

  async getFile(tenant: string, id: string): Promise<StoredFile | undefined> {
    const r = this.#db.query<FileRow, [string, string]>(`SELECT ${FILE_COLUMNS} FROM files WHERE id = ? AND tenant = ?`).get(id, tenant);
    return r === null ? undefined : toFile(r);
  }

  async getFileContent(tenant: string, id: string): Promise<Uint8Array | undefined> {
    const r = this.#db.query<{ content: Uint8Array }, [string, string]>("SELECT content FROM files WHERE id = ? AND tenant = ?").get(id, tenant);
    return r === null ? undefined : r.content;
  }

  async deleteFile(tenant: string, id: string): Promise<boolean> {
    return this.#db.query("DELETE FROM files WHERE id = ? AND tenant = ?").run(id, tenant).changes === 1;
  }

  async listFiles(tenant: string, q: PageQuery & { order: "asc" | "desc"; purpose?: string }): Promise<Page<StoredFile>> {
    const cursor = q.after === undefined ? undefined : this.#seqOf("files", tenant, q.after);
    const cmp = q.order === "asc" ? ">" : "<";
    const rows = this.#db
      .query<FileRow, [string, number, string | null, string | null, number]>(
        `SELECT ${FILE_COLUMNS} FROM files WHERE tenant = ? AND seq ${cmp} ? AND (? IS NULL OR purpose = ?)
         ORDER BY seq ${q.order === "asc" ? "ASC" : "DESC"} LIMIT ?`,
      )
      .all(tenant, cursor ?? (q.order === "asc" ? 0 : Number.MAX_SAFE_INTEGER), q.purpose ?? null, q.purpose ?? null, q.limit + 1);
    return { items: rows.slice(0, q.limit).map(toFile), hasMore: rows.length > q.limit };
  }

  async createBatch(doc: BatchDoc, lines: readonly BatchLine[]): Promise<Batch> {
    const insertLine = this.#db.query("INSERT INTO batch_lines (batch_id, line_no, custom_id, url, body) VALUES (?, ?, ?, ?, ?)");
    this.#db.transaction(() => {
      this.#db.query("INSERT INTO batches (id, tenant, status, doc, total) VALUES (?, ?, ?, ?, ?)").run(doc.id, doc.tenant, doc.status, JSON.stringify(doc), lines.length);
      for (const l of lines) insertLine.run(doc.id, l.lineNo, l.customId, l.url, l.body);
    })();
    return { ...doc, counts: { total: lines.length, completed: 0, failed: 0, promptTokens: 0, completionTokens: 0 } };
  }

  async getBatch(tenant: string, id: string): Promise<Batch | undefined> {
    const r = this.#db.query<BatchRow, [string, string]>(`SELECT ${BATCH_COLUMNS} FROM batches WHERE id = ? AND tenant = ?`).get(id, tenant);
    return r === null ? undefined : toBatch(r);
  }

  async listBatches(tenant: string, q: PageQuery): Promise<Page<Batch>> {
    const cursor = q.after === undefined ? Number.MAX_SAFE_INTEGER : this.#seqOf("batches", tenant, q.after);
    const rows = this.#db
      .query<BatchRow, [string, number, number]>(`SELECT ${BATCH_COLUMNS} FROM batches WHERE tenant = ? AND seq < ? ORDER BY seq DESC LIMIT ?`)
      .all(tenant, cursor, q.limit + 1);
    return { items: rows.slice(0, q.limit).map(toBatch), hasMore: rows.length > q.limit };
  }

  async activeBatches(): Promise<Batch[]> {
    const marks = ACTIVE_STATUSES.map(() => "?").join(", ");
    return this.#db
      .query<BatchRow, string[]>(`SELECT ${BATCH_COLUMNS} FROM batches WHERE status IN (${marks}) ORDER BY seq`)
      .all(...ACTIVE_STATUSES)
      .map(toBatch);
  }

  async updateBatch(id: string, from: readonly BatchStatus[], patch: Partial<Omit<BatchDoc, "id" | "tenant">>): Promise<Batch | undefined> {
    return this.#db.transaction((): Batch | undefined => {
      const r = this.#db.query<BatchRow, [string]>(`SELECT ${BATCH_COLUMNS} FROM batches WHERE id = ?`).get(id);
      if (r === null) return undefined;
      const current = toBatch(r);
      if (!from.includes(current.status)) return undefined;
      const { counts, ...doc } = { ...current, ...patch };
      this.#db.query("UPDATE batches SET status = ?, doc = ? WHERE id = ?").run(doc.status, JSON.stringify(doc), id);
      return { ...doc, counts };
    })();
  }

  async claimLines(batchId: string, max: number, owner: string, nowMs: number, leaseUntilMs: number): Promise<ClaimedLine[]> {
    if (max <= 0) return [];
    // One statement, so a claim is atomic even with a second process on the file.
    const rows = this.#db
      .query<LineRow, [string, string, number, number, number]>(
        `UPDATE batch_lines SET state = 'running', owner = ?2, lease_until_ms = ?5
         WHERE batch_id = ?1 AND line_no IN (
           SELECT line_no FROM batch_lines WHERE batch_id = ?1
             AND ((state = 'pending' AND not_before_ms <= ?3) OR (state = 'running' AND lease_until_ms < ?3))
           ORDER BY line_no LIMIT ?4)
         RETURNING *`,
      )
      .all(batchId, owner, nowMs, max, leaseUntilMs);
    return rows
      .map((r) => ({ batchId, lineNo: r.line_no, customId: r.custom_id, method: "POST" as const, url: r.url as ClaimedLine["url"], body: r.body, attempts: r.attempts }))
      .sort((a, b) => a.lineNo - b.lineNo);
  }

  async renewLeases(owner: string, leaseUntilMs: number): Promise<void> {
    this.#db.query("UPDATE batch_lines SET lease_until_ms = ? WHERE owner = ? AND state = 'running'").run(leaseUntilMs, owner);
  }

  async releaseLine(batchId: string, lineNo: number, owner: string, notBeforeMs: number, failedAttempt: boolean): Promise<void> {
    this.#db
      .query(
        `UPDATE batch_lines SET state = 'pending', owner = NULL, not_before_ms = ?, attempts = attempts + ?
         WHERE batch_id = ? AND line_no = ? AND state = 'running' AND owner = ?`,
      )
      .run(notBeforeMs, failedAttempt ? 1 : 0, batchId, lineNo, owner);
  }

  async recordResult(batchId: string, lineNo: number, res: LineResult): Promise<boolean> {
    return this.#db.transaction((): boolean => {
      const changed = this.#db
        .query(
          `UPDATE batch_lines SET state = 'done', owner = NULL, ok = ?, status_code = ?, result_body = ?, request_id = ?,
             error_code = ?, error_message = ?, prompt_tokens = ?, completion_tokens = ?
           WHERE batch_id = ? AND line_no = ? AND state != 'done'`,
        )
        .run(res.ok ? 1 : 0, res.statusCode, res.body, res.requestId, res.errorCode, res.errorMessage, res.promptTokens, res.completionTokens, batchId, lineNo).changes;
      if (changed !== 1) return false;
      this.#db
        .query("UPDATE batches SET completed = completed + ?, failed = failed + ?, prompt_tokens = prompt_tokens + ?, completion_tokens = completion_tokens + ? WHERE id = ?")
        .run(res.ok ? 1 : 0, res.ok ? 0 : 1, res.promptTokens, res.completionTokens, batchId);
      return true;
    })();
  }

  async reclaimInFlight(): Promise<number> {
    return this.#db.query("UPDATE batch_lines SET state = 'pending', owner = NULL WHERE state = 'running'").run().changes;
  }

  async lineOutcomes(batchId: string): Promise<LineOutcome[]> {
    return this.#db
      .query<LineRow, [string]>("SELECT * FROM batch_lines WHERE batch_id = ? ORDER BY line_no")
      .all(batchId)
      .map((r) => ({ lineNo: r.line_no, customId: r.custom_id, result: r.state === "done" ? toResult(r) : null }));
  }

  /** The insertion sequence of an id the tenant owns (the pagination cursor). */
  #seqOf(table: "files" | "batches", tenant: string, id: string): number {
    const r = this.#db.query<{ seq: number }, [string, string]>(`SELECT seq FROM ${table} WHERE id = ? AND tenant = ?`).get(id, tenant);
    if (r === null) throw new UnknownCursorError(id);
    return r.seq;
  }
}
