/**
 * A responses.sqlite written by an earlier llmgw kept each record in one
 * wide row (input items and the background lease inline, small columns
 * behind large ones). At open it is brought to the current layout once:
 * records copied with their small columns first, input items to rows of
 * their own, background responses still to run to `response_runs`.
 */
import type { Database } from "bun:sqlite";
import { logger } from "../shared/logger.ts";

function columns(db: Database, table: string): Set<string> {
  return new Set(
    db
      .query<{ name: string }, []>(`SELECT name FROM pragma_table_info('${table}')`)
      .all()
      .map((c) => c.name),
  );
}

/** Create the current layout (`schema`), moving an earlier one's records into it. */
export function migrateResponsesSchema(db: Database, schema: string): void {
  if (!columns(db, "responses").has("input")) {
    db.run(schema);
    return;
  }
  db.transaction(() => {
    db.run("ALTER TABLE responses RENAME TO responses_before_v2");
    for (const index of ["responses_by_tenant_age", "responses_by_expiry", "responses_background"]) db.run(`DROP INDEX IF EXISTS ${index}`);
    db.run(schema);
    db.run(`INSERT INTO responses (tenant, id, created_ms, expires_ms, status, bytes, previous_id, request, response, context)
      SELECT tenant, id, created_ms, expires_ms, status, bytes, NULL, request, response, context FROM responses_before_v2`);
    db.run(`INSERT INTO response_runs (tenant, id, created_ms, expires_ms, lease_until_ms, owner)
      SELECT tenant, id, created_ms, expires_ms, COALESCE(lease_until_ms, 0), owner FROM responses_before_v2 WHERE request IS NOT NULL AND status IN ('queued', 'in_progress')`);
    const insert = db.query("INSERT INTO response_items (tenant, id, seq, item_id, item) VALUES (?, ?, ?, ?, ?)");
    let records = 0;
    for (const r of db.query<{ tenant: string; id: string; input: string }, []>("SELECT tenant, id, input FROM responses_before_v2").iterate()) {
      let items: unknown[] = [];
      try {
        const parsed: unknown = JSON.parse(r.input);
        if (Array.isArray(parsed)) items = parsed;
      } catch {
        // An unreadable input list lists nothing; the response itself is kept.
      }
      items.forEach((item, seq) => {
        const itemId = typeof item === "object" && item !== null ? (item as { id?: unknown }).id : undefined;
        insert.run(r.tenant, r.id, seq, typeof itemId === "string" ? itemId : "", JSON.stringify(item));
      });
      records++;
    }
    db.run("DROP TABLE responses_before_v2");
    logger().info({ records }, "responses store brought to the current layout: input items and background runs in tables of their own");
  })();
}
