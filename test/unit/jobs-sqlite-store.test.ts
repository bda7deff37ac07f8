/** The JobsStore contract against the embedded bun:sqlite backend, plus what only it does: state that survives reopening the data directory. */
import { Database } from "bun:sqlite";
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { JobsStore } from "../../src/jobs/jobs-store.ts";
import { SqliteJobsStore } from "../../src/jobs/sqlite-jobs-store.ts";
import { filesDirOf, openStateDatabase } from "../../src/jobs/state-db.ts";
import { batchDoc, jobsStoreContract, lines, okResult } from "../helpers/jobs-store-contract.ts";

const root = mkdtempSync(join(tmpdir(), "llmgw-jobs-contract-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const dbs = new Map<JobsStore, Database>();
let n = 0;

jobsStoreContract(
  "bun:sqlite",
  () => {
    const db = new Database(":memory:", { strict: true });
    const s = new SqliteJobsStore(db, join(root, `files-${n++}`));
    dbs.set(s, db);
    return s;
  },
  async (s, id) => void dbs.get(s)!.query("UPDATE batches SET doc = '{not json' WHERE id = ?").run(id),
);

test("a reopened data directory has the batches, results and in-flight lines; reclaim re-drives the in-flight ones", async () => {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-jobs-store-"));
  try {
    const db1 = openStateDatabase(dir);
    expect(db1.query<{ journal_mode: string }, []>("PRAGMA journal_mode").get()?.journal_mode).toBe("wal");
    const s1 = new SqliteJobsStore(db1, filesDirOf(dir));
    await s1.createBatch(batchDoc("b", "a"), [lines(4)]);
    await s1.claimLines("b", 3, "dead-runner", 0, Number.MAX_SAFE_INTEGER);
    await s1.recordResults("b", [{ lineNo: 1, result: okResult() }]);
    db1.close();
    const s2 = new SqliteJobsStore(openStateDatabase(dir), filesDirOf(dir));
    expect((await s2.getBatch("a", "b"))?.counts.completed).toBe(1);
    expect(await s2.claimLines("b", 10, "new-runner", 0, 1)).toEqual([expect.objectContaining({ lineNo: 4 })]);
    expect(await s2.reclaimInFlight()).toBe(3); // lines 2 and 3 of the dead runner, and 4 just claimed
    expect((await s2.claimLines("b", 10, "new-runner", 0, 1)).map((l) => l.lineNo)).toEqual([2, 3, 4]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
