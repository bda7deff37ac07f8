/**
 * An idle background runner claims every second: over a store of large
 * completed responses its claim must stay an index lookup that reads no
 * record (bytes read from the file, counted by the kernel in /proc/self/io,
 * do not depend on how busy the host is), and its plan must name only the
 * narrow run table. A legacy store (one wide row per record) is migrated so.
 */
import { Database } from "bun:sqlite";
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CLAIM_SQL, SqliteResponsesStore } from "../../src/jobs/responses-store.ts";

const dir = mkdtempSync(join(tmpdir(), "llmgw-idle-claim-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function bytesRead(): number {
  return Number(/^rchar: (\d+)$/m.exec(readFileSync("/proc/self/io", "utf8"))![1]);
}

test("claims over twenty 2 MB stored responses read no record: kilobytes, not the store", async () => {
  const file = join(dir, "responses.sqlite");
  const writer = new SqliteResponsesStore(new Database(file, { create: true, strict: true }));
  const big = JSON.stringify([{ role: "user", content: "x".repeat(1_000_000) }]);
  const now = Date.now();
  for (let i = 0; i < 20; i++) {
    await writer.put(
      { id: `resp_${i}`, tenant: "t", createdMs: now + i, expiresMs: now + 3_600_000, status: "completed", response: "{}", input: big, context: big },
      Number.MAX_SAFE_INTEGER,
    );
  }
  // A fresh connection: nothing of the store in SQLite's page cache.
  const store = new SqliteResponsesStore(new Database(file, { strict: true }));
  const before = bytesRead();
  for (let i = 0; i < 10; i++) expect(await store.claim("r", Date.now(), Date.now() + 30_000, 4)).toEqual([]);
  const read = bytesRead() - before;
  // The store is 80 MB; ten claims that walked it would read hundreds of MB.
  expect(read).toBeLessThan(1_000_000);
});

test("the claim's plan is a range of the run table's lease index, and never touches the responses table", () => {
  const db = new Database(":memory:", { strict: true });
  new SqliteResponsesStore(db);
  const plan = db
    .query<{ detail: string }, [number, number, number]>(`EXPLAIN QUERY PLAN ${CLAIM_SQL}`)
    .all(0, 0, 1)
    .map((r) => r.detail)
    .join("\n");
  expect(plan).toContain("USING INDEX response_runs_by_lease (lease_until_ms<?)");
  expect(plan).not.toMatch(/\bresponses\b/);
});
