/**
 * A data_dir written by an earlier llmgw kept file bytes in the `files`
 * table and request bodies and results inline in `batch_lines`. At open,
 * such a database is brought to the current layout once: bytes moved to
 * data_dir/files, bodies and results to their own tables, batch_lines
 * narrowed. Batches in flight carry on where they were.
 */
import type { Database } from "bun:sqlite";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { logger } from "../shared/logger.ts";

function columns(db: Database, table: string): Set<string> {
  return new Set(
    db
      .query<{ name: string }, []>(`SELECT name FROM pragma_table_info('${table}')`)
      .all()
      .map((c) => c.name),
  );
}

export function migrateSqliteJobsSchema(db: Database, filesDir: string): void {
  if (columns(db, "files").has("content")) {
    mkdirSync(filesDir, { recursive: true });
    let moved = 0;
    for (const r of db.query<{ id: string; content: Uint8Array }, []>("SELECT id, content FROM files").iterate()) {
      writeFileSync(join(filesDir, encodeURIComponent(r.id)), r.content);
      moved++;
    }
    db.run("ALTER TABLE files DROP COLUMN content");
    logger().info({ files: moved, filesDir }, "file bytes moved out of the batch store to data_dir/files");
  }
  if (!columns(db, "batch_lines").has("result_body")) return;
  db.transaction(() => {
    db.run(
      `CREATE TABLE IF NOT EXISTS batch_line_bodies (batch_id TEXT NOT NULL, line_no INTEGER NOT NULL, url TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (batch_id, line_no))`,
    );
    db.run(`CREATE TABLE IF NOT EXISTS batch_results (batch_id TEXT NOT NULL, line_no INTEGER NOT NULL, ok INTEGER NOT NULL, status_code INTEGER, body TEXT, request_id TEXT,
      error_code TEXT, error_message TEXT, prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (batch_id, line_no))`);
    db.run("INSERT INTO batch_line_bodies SELECT batch_id, line_no, url, body FROM batch_lines WHERE state != 'done'");
    db.run(`INSERT INTO batch_results SELECT batch_id, line_no, coalesce(ok, 0), status_code, result_body, request_id, error_code, error_message, prompt_tokens, completion_tokens
      FROM batch_lines WHERE state = 'done'`);
    db.run("DROP INDEX IF EXISTS batch_lines_by_state");
    db.run("ALTER TABLE batch_lines RENAME TO batch_lines_before_v2");
    db.run(`CREATE TABLE batch_lines (batch_id TEXT NOT NULL, line_no INTEGER NOT NULL, custom_id TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending',
      attempts INTEGER NOT NULL DEFAULT 0, not_before_ms INTEGER NOT NULL DEFAULT 0, owner TEXT, lease_until_ms INTEGER NOT NULL DEFAULT 0,
      PRIMARY KEY (batch_id, line_no)) WITHOUT ROWID`);
    db.run("INSERT INTO batch_lines SELECT batch_id, line_no, custom_id, state, attempts, not_before_ms, owner, lease_until_ms FROM batch_lines_before_v2");
    db.run("DROP TABLE batch_lines_before_v2");
  })();
  logger().info("batch lines split into claim state, request bodies and results");
}
