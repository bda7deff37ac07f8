/**
 * Idempotency records behind a small async interface (shared-state/
 * redis-idempotency-store.ts implements it over Redis) and its embedded
 * bun:sqlite backend. A key lives per tenant ("scope"): it
 * is running (one request holds it, with a lock that lapses if that
 * gateway dies) or done (the recorded answer, until it expires).
 */
import type { Database } from "bun:sqlite";
import type { RecordedResponse } from "../shared/recorded-response.ts";

export type IdempotencyBegin =
  /** The caller holds the key now and must complete or abandon it with `token`. */
  { kind: "started"; token: string } | { kind: "completed"; fingerprint: string; response: RecordedResponse } | { kind: "running"; fingerprint: string };

export interface IdempotencyStore {
  /** Atomically: take an absent, expired or lock-lapsed key, or report what holds it. */
  begin(scope: string, key: string, fingerprint: string, nowMs: number, lockUntilMs: number): Promise<IdempotencyBegin>;
  /** Store the answer of the request holding `token`; false if it no longer holds the key. */
  complete(scope: string, key: string, token: string, response: RecordedResponse, expiresAtMs: number): Promise<boolean>;
  /** Free the key (the request failed or its answer is not kept), so a retry runs again. */
  abandon(scope: string, key: string, token: string): Promise<void>;
  /** Embedded backend at start: keys held by this process before a crash are free again. */
  releaseAllRunning(): Promise<number>;
  purgeExpired(nowMs: number): Promise<number>;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS idempotency (
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  state TEXT NOT NULL,
  token TEXT NOT NULL,
  until_ms INTEGER NOT NULL,
  status INTEGER,
  headers TEXT,
  body BLOB,
  PRIMARY KEY (scope, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idempotency_by_until ON idempotency (until_ms);
`;

interface Row {
  fingerprint: string;
  state: "running" | "done";
  until_ms: number;
  status: number | null;
  headers: string | null;
  body: Uint8Array | null;
}

/** `until_ms` is the lock's end while running and the record's expiry once done. */
export class SqliteIdempotencyStore implements IdempotencyStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
    db.run(SCHEMA);
  }

  async begin(scope: string, key: string, fingerprint: string, nowMs: number, lockUntilMs: number): Promise<IdempotencyBegin> {
    return this.#db.transaction((): IdempotencyBegin => {
      const row = this.#db
        .query<Row, [string, string]>("SELECT fingerprint, state, until_ms, status, headers, body FROM idempotency WHERE scope = ? AND key = ?")
        .get(scope, key);
      if (row !== null && row.until_ms > nowMs) {
        if (row.state === "running") return { kind: "running", fingerprint: row.fingerprint };
        const headers = JSON.parse(row.headers ?? "[]") as [string, string][];
        return { kind: "completed", fingerprint: row.fingerprint, response: { status: row.status ?? 200, headers, body: row.body ?? new Uint8Array(0) } };
      }
      const token = crypto.randomUUID();
      this.#db
        .query("INSERT OR REPLACE INTO idempotency (scope, key, fingerprint, state, token, until_ms) VALUES (?, ?, ?, 'running', ?, ?)")
        .run(scope, key, fingerprint, token, lockUntilMs);
      return { kind: "started", token };
    })();
  }

  async complete(scope: string, key: string, token: string, r: RecordedResponse, expiresAtMs: number): Promise<boolean> {
    const changed = this.#db
      .query(
        "UPDATE idempotency SET state = 'done', until_ms = ?, status = ?, headers = ?, body = ? WHERE scope = ? AND key = ? AND token = ? AND state = 'running'",
      )
      .run(expiresAtMs, r.status, JSON.stringify(r.headers), r.body, scope, key, token).changes;
    return changed === 1;
  }

  async abandon(scope: string, key: string, token: string): Promise<void> {
    this.#db.query("DELETE FROM idempotency WHERE scope = ? AND key = ? AND token = ? AND state = 'running'").run(scope, key, token);
  }

  async releaseAllRunning(): Promise<number> {
    return this.#db.query("DELETE FROM idempotency WHERE state = 'running'").run().changes;
  }

  async purgeExpired(nowMs: number): Promise<number> {
    return this.#db.query("DELETE FROM idempotency WHERE until_ms <= ?").run(nowMs).changes;
  }
}
