/** A data_dir written by an earlier llmgw (file bytes and line bodies and results inline in the database) opens in the current layout, its batch carrying on. */
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteJobsStore } from "../../src/jobs/sqlite-jobs-store.ts";
import { batchDoc, contentText } from "../helpers/jobs-store-contract.ts";

const EARLIER = `
CREATE TABLE files (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL, filename TEXT NOT NULL, purpose TEXT NOT NULL,
  bytes INTEGER NOT NULL, created_at_ms INTEGER NOT NULL, endpoint TEXT, model TEXT, line_count INTEGER NOT NULL, content BLOB NOT NULL);
CREATE TABLE batches (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL, status TEXT NOT NULL, doc TEXT NOT NULL, total INTEGER NOT NULL,
  completed INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0, prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0);
CREATE TABLE batch_lines (batch_id TEXT NOT NULL, line_no INTEGER NOT NULL, custom_id TEXT NOT NULL, url TEXT NOT NULL, body TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending',
  attempts INTEGER NOT NULL DEFAULT 0, not_before_ms INTEGER NOT NULL DEFAULT 0, owner TEXT, lease_until_ms INTEGER NOT NULL DEFAULT 0, ok INTEGER, status_code INTEGER,
  result_body TEXT, request_id TEXT, error_code TEXT, error_message TEXT, prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (batch_id, line_no)) WITHOUT ROWID;
CREATE INDEX batch_lines_by_state ON batch_lines (batch_id, state, line_no);
`;

test("file bytes move to data_dir/files; bodies of pending lines and results of done ones move to their tables; the batch carries on", async () => {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-migrate-"));
  try {
    const db = new Database(join(dir, "llmgw.sqlite"), { create: true, strict: true });
    db.run(EARLIER);
    db.query(
      "INSERT INTO files (id, tenant, filename, purpose, bytes, created_at_ms, endpoint, model, line_count, content) VALUES ('file-a', 't', 'a.jsonl', 'batch', 5, 1, NULL, NULL, 1, ?)",
    ).run(new TextEncoder().encode("hello"));
    const doc = batchDoc("b", "t");
    db.query("INSERT INTO batches (id, tenant, status, doc, total, completed) VALUES ('b', 't', 'in_progress', ?, 2, 1)").run(JSON.stringify(doc));
    db.run(`INSERT INTO batch_lines (batch_id, line_no, custom_id, url, body, state, ok, status_code, result_body, request_id, prompt_tokens)
      VALUES ('b', 1, 'c1', '/v1/chat/completions', '{"n":1}', 'done', 1, 200, '{"answer":1}', 'r1', 3)`);
    db.run("INSERT INTO batch_lines (batch_id, line_no, custom_id, url, body, state) VALUES ('b', 2, 'c2', '/v1/chat/completions', '{\"n\":2}', 'pending')");

    const store = new SqliteJobsStore(db, join(dir, "files"));
    expect(readFileSync(join(dir, "files", "file-a"), "utf8")).toBe("hello");
    expect(await contentText(store, "t", "file-a")).toBe("hello");
    const claimed = await store.claimLines("b", 5, "r", 0, 1_000);
    expect(claimed.map((l) => [l.lineNo, l.customId, l.body])).toEqual([[2, "c2", '{"n":2}']]);
    const outcomes = await store.lineOutcomes("b", 0, 10);
    expect(outcomes.map((o) => [o.customId, o.result?.statusCode ?? null, o.result?.body ?? null])).toEqual([
      ["c1", 200, '{"answer":1}'],
      ["c2", null, null],
    ]);
    // Opening again changes nothing.
    const again = new SqliteJobsStore(db, join(dir, "files"));
    expect((await again.getBatch("t", "b"))?.counts.completed).toBe(1);
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
