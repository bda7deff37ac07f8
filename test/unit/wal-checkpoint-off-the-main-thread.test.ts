/** The batch store's WAL is checkpointed by a worker: the main connection never checkpoints, and the log is still copied into the database. */
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStateDatabase, STATE_DB_FILE } from "../../src/jobs/state-db.ts";
import { WalCheckpointer } from "../../src/jobs/wal-checkpoint.ts";
import { waitUntil } from "../helpers/processes.ts";

test("writes only append to the log on the main connection; the worker copies them into the database file", async () => {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-wal-"));
  try {
    const db = openStateDatabase(dir, { checkpointElsewhere: true });
    expect(db.query<{ wal_autocheckpoint: number }, []>("PRAGMA wal_autocheckpoint").get()?.wal_autocheckpoint).toBe(0);
    db.run("CREATE TABLE t (v BLOB)");
    const dbFile = join(dir, STATE_DB_FILE);
    const before = statSync(dbFile).size;
    const insert = db.query("INSERT INTO t VALUES (?)");
    for (let i = 0; i < 2_000; i++) insert.run(new Uint8Array(4096));
    // Nothing reached the database file yet: it is all in the log (~8 MB past the automatic checkpoint's 1,000 pages).
    expect(statSync(dbFile).size).toBe(before);
    const cp = new WalCheckpointer(dbFile, 50);
    // The file grows as the worker copies; its message saying so comes after.
    await waitUntil(() => statSync(dbFile).size > 8_000_000 && cp.lastCheckpointed !== undefined, { what: "the worker's checkpoint" });
    expect(cp.lastCheckpointed!).toBeGreaterThan(1_000);
    await cp.stop();
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
