/**
 * A batch runner as its own process, for the restart test: `bun
 * batch-runner-process.ts <data-dir> <engine-url> <concurrency>` drives the
 * batches in the data directory against the engine until killed. It prints
 * one "runner started" line once it has reclaimed what a previous run left.
 */
import { BatchRunner } from "../../src/jobs/batch-runner.ts";
import { SqliteJobsStore } from "../../src/jobs/sqlite-jobs-store.ts";
import { filesDirOf, openStateDatabase } from "../../src/jobs/state-db.ts";
import { engineSend } from "./batch-send.ts";

const [dataDir, engine, concurrency] = process.argv.slice(2);
if (!dataDir || !engine || !concurrency) {
  console.error("usage: batch-runner-process.ts <data-dir> <engine-url> <concurrency>");
  process.exit(2);
}
const n = Number(concurrency);
const runner = new BatchRunner({
  store: new SqliteJobsStore(openStateDatabase(dataDir), filesDirOf(dataDir)),
  send: engineSend(engine),
  limits: { concurrencyPerBatch: n, concurrencyPerTenant: n, maxAttempts: 3, retryBackoffMs: 50, leaseMs: 30_000 },
  reclaimOnStart: true,
  tickMs: 50,
  audit: () => {},
});
await runner.start();
console.log(JSON.stringify({ msg: "runner started", pid: process.pid }));
