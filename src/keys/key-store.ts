/** Where live API keys and their usage are kept: the contract (shared-state/redis-key-store.ts implements it over Redis) and its embedded bun:sqlite backend. */
import type { Database } from "bun:sqlite";
import { logger } from "../shared/logger.ts";
import { type KeyUsage, type LiveKeyRecord, liveKeyRecordSchema, NO_USAGE } from "./live-key.ts";

/** Usage of one key since the last flush of one gateway. */
export interface UsageDelta {
  requests: number;
  tokensIn: number;
  tokensOut: number;
  lastUsedMs: number;
}

export interface KeyStore {
  /** A number that changes whenever a key is written: gateways poll it each second and read the keys again only when it moved. */
  version(): Promise<number>;
  /** Every stored key; an unreadable record is skipped (logged), never fatal. */
  list(): Promise<LiveKeyRecord[]>;
  get(id: string): Promise<LiveKeyRecord | undefined>;
  /** Create or replace, and move the version. */
  put(record: LiveKeyRecord): Promise<void>;
  /** Add one gateway's usage (sums add; last use takes the later). */
  addUsage(deltas: ReadonlyMap<string, UsageDelta>): Promise<void>;
  /** Usage of the given keys (absent ones: none). */
  usage(ids: readonly string[]): Promise<Map<string, KeyUsage>>;
}

/** A stored JSON document as a record, or undefined (logged) when it is not one: another version's or a hand-edited row must not stop the gateway. */
export function parseRecord(json: string, where: string): LiveKeyRecord | undefined {
  try {
    const parsed = liveKeyRecordSchema.safeParse(JSON.parse(json));
    if (parsed.success) return parsed.data;
    logger().warn({ where, issue: parsed.error.issues[0]?.message }, "live key record unreadable: skipped");
  } catch {
    logger().warn({ where }, "live key record is not JSON: skipped");
  }
  return undefined;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS live_keys (id TEXT PRIMARY KEY, doc TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS live_keys_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS live_key_usage (
  id TEXT PRIMARY KEY,
  requests INTEGER NOT NULL,
  tokens_in INTEGER NOT NULL,
  tokens_out INTEGER NOT NULL,
  last_used_ms INTEGER
) WITHOUT ROWID;
`;

/** The embedded backend: a file of its own in data_dir (keys.sqlite), so a corrupt batch store cannot take the keys with it. */
export class SqliteKeyStore implements KeyStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
    db.run(SCHEMA);
  }

  async version(): Promise<number> {
    return this.#db.query<{ value: number }, []>("SELECT value FROM live_keys_meta WHERE name = 'version'").get()?.value ?? 0;
  }

  async list(): Promise<LiveKeyRecord[]> {
    const rows = this.#db.query<{ id: string; doc: string }, []>("SELECT id, doc FROM live_keys ORDER BY id").all();
    return rows.flatMap((r) => parseRecord(r.doc, r.id) ?? []);
  }

  async get(id: string): Promise<LiveKeyRecord | undefined> {
    const row = this.#db.query<{ doc: string }, [string]>("SELECT doc FROM live_keys WHERE id = ?").get(id);
    return row === null ? undefined : parseRecord(row.doc, id);
  }

  async put(record: LiveKeyRecord): Promise<void> {
    this.#db.transaction(() => {
      this.#db.query("INSERT INTO live_keys (id, doc) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET doc = excluded.doc").run(record.id, JSON.stringify(record));
      this.#db.query("INSERT INTO live_keys_meta (name, value) VALUES ('version', 1) ON CONFLICT (name) DO UPDATE SET value = value + 1").run();
    })();
  }

  async addUsage(deltas: ReadonlyMap<string, UsageDelta>): Promise<void> {
    const add = this.#db.query(
      `INSERT INTO live_key_usage (id, requests, tokens_in, tokens_out, last_used_ms) VALUES (?1, ?2, ?3, ?4, ?5)
       ON CONFLICT (id) DO UPDATE SET requests = requests + ?2, tokens_in = tokens_in + ?3, tokens_out = tokens_out + ?4,
         last_used_ms = max(coalesce(last_used_ms, 0), ?5)`,
    );
    this.#db.transaction(() => {
      for (const [id, d] of deltas) add.run(id, d.requests, d.tokensIn, d.tokensOut, d.lastUsedMs);
    })();
  }

  async usage(ids: readonly string[]): Promise<Map<string, KeyUsage>> {
    const q = this.#db.query<{ requests: number; tokens_in: number; tokens_out: number; last_used_ms: number | null }, [string]>(
      "SELECT requests, tokens_in, tokens_out, last_used_ms FROM live_key_usage WHERE id = ?",
    );
    const out = new Map<string, KeyUsage>();
    for (const id of ids) out.set(id, q.get(id) ?? NO_USAGE);
    return out;
  }
}
