/** Opens the embedded store: one bun:sqlite database in the data directory, in WAL mode. */
import { Database } from "bun:sqlite";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

export const STATE_DB_FILE = "llmgw.sqlite";

/**
 * WAL lets readers (GET /v1/batches) run while the runner writes. synchronous
 * = NORMAL keeps every committed transaction across a process crash (SIGKILL)
 * and loses at most the last ones on power loss, which is what a gateway
 * restart needs at a fraction of FULL's fsyncs (sqlite.org/wal.html,
 * "Performance Considerations"). busy_timeout covers a second process (a CLI,
 * a test) reading the same file.
 */
export function openStateDatabase(dataDir: string, opts: { checkpointElsewhere?: boolean; file?: string } = {}): Database {
  mkdirSync(dataDir, { recursive: true });
  const db = new Database(join(dataDir, opts.file ?? STATE_DB_FILE), { create: true, strict: true });
  db.run("PRAGMA journal_mode = WAL");
  db.run("PRAGMA synchronous = NORMAL");
  db.run("PRAGMA busy_timeout = 5000");
  // The gateway checkpoints in a worker (wal-checkpoint.ts): a checkpoint on this connection would block the event loop.
  if (opts.checkpointElsewhere) db.run("PRAGMA wal_autocheckpoint = 0");
  return db;
}

/** Where the embedded store keeps file bytes. */
export function filesDirOf(dataDir: string): string {
  return join(dataDir, "files");
}
