/**
 * WAL checkpoints of the batch store off the main thread. A checkpoint
 * copies the write-ahead log into the database file and fsyncs both; run by
 * SQLite's automatic checkpoint on whichever connection commits, it blocked
 * the gateway's event loop for 50–300 ms every few MB a batch wrote (126
 * stalls during a 10,000-line embeddings batch). The main connection turns
 * the automatic checkpoint off; a worker with its own connection to the same
 * file checkpoints every `intervalMs` (PASSIVE: it never waits for, nor
 * blocks, the writer). With synchronous = NORMAL a commit then only appends
 * to the log, as SQLite documents for WAL (sqlite.org/wal.html).
 */
import { Database } from "bun:sqlite";

export type ToCheckpointer = { type: "start"; path: string; intervalMs: number } | { type: "stop" };
type FromCheckpointer = { type: "checkpointed"; pages: number } | { type: "stopped" };

const WORKER_URL = new URL("../../workers/checkpoint.ts", import.meta.url);
const CHECKPOINT_INTERVAL_MS = 1_000;

/** The worker's loop: checkpoint the file at `path` every `intervalMs`; returns stop. */
export function runCheckpoints(path: string, intervalMs: number, onCheckpoint: (pages: number) => void): () => void {
  const db = new Database(path, { strict: true });
  db.run("PRAGMA busy_timeout = 1000");
  const timer = setInterval(() => {
    try {
      const r = db.query<{ busy: number; log: number; checkpointed: number }, []>("PRAGMA wal_checkpoint(PASSIVE)").get();
      if (r && r.checkpointed > 0) onCheckpoint(r.checkpointed);
    } catch {
      // Busy or gone: the next round tries again; the log only grows meanwhile.
    }
  }, intervalMs);
  return () => {
    clearInterval(timer);
    db.close();
  };
}

/** The main thread's handle on the checkpoint worker. */
export class WalCheckpointer {
  readonly #worker: Worker;
  /** Frames the last checkpoint had copied into the database file (undefined before the first). */
  lastCheckpointed: number | undefined;

  constructor(path: string, intervalMs = CHECKPOINT_INTERVAL_MS) {
    this.#worker = new Worker(WORKER_URL.href);
    this.#worker.onmessage = (event: MessageEvent<FromCheckpointer>) => {
      if (event.data.type === "checkpointed") this.lastCheckpointed = event.data.pages;
    };
    this.#worker.postMessage({ type: "start", path, intervalMs } satisfies ToCheckpointer);
  }

  /** Stop checkpointing (bounded), then end the worker. */
  async stop(timeoutMs = 1_000): Promise<void> {
    const stopped = new Promise<void>((resolve) => {
      this.#worker.onmessage = (event: MessageEvent<FromCheckpointer>) => {
        if (event.data.type === "stopped") resolve();
      };
    });
    this.#worker.postMessage({ type: "stop" } satisfies ToCheckpointer);
    await Promise.race([stopped, Bun.sleep(timeoutMs)]);
    this.#worker.terminate();
  }
}
