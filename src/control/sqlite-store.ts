/**
 * The embedded fleet store: bun:sqlite in `<data_dir>/fleet.sqlite`, WAL
 * (readers never block the one writer; a crash loses no committed write).
 * One table of JSON records keyed by (collection, key); each record is
 * checked when read back (src/control/record-schemas.ts). Calls are
 * synchronous underneath (a point write is microseconds) and async on the
 * interface, which a networked backend needs.
 */
import { Database } from "bun:sqlite";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { RECORD_CODECS, type RecordCodec, type RecordTypes, readRecord } from "./record-schemas.ts";
import type { Collection, CollectionName, FleetStore } from "./store.ts";

export const FLEET_DB_FILE = "fleet.sqlite";

/** How long a writer waits for another process's write lock before failing (two gateways on one data_dir). */
const BUSY_TIMEOUT_MS = 5_000;

class SqliteCollection<T> implements Collection<T> {
  private readonly listQ;
  private readonly getQ;
  private readonly putQ;
  private readonly insertQ;
  private readonly deleteQ;

  constructor(
    db: Database,
    private readonly name: CollectionName,
    private readonly codec: RecordCodec<T>,
  ) {
    this.listQ = db.query<{ key: string; json: string }, [string]>("SELECT key, json FROM fleet_records WHERE collection = ? ORDER BY key");
    this.getQ = db.query<{ json: string }, [string, string]>("SELECT json FROM fleet_records WHERE collection = ? AND key = ?");
    this.putQ = db.query<unknown, [string, string, string, number]>(
      "INSERT INTO fleet_records (collection, key, json, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (collection, key) DO UPDATE SET json = excluded.json, updated_at = excluded.updated_at",
    );
    this.insertQ = db.query<unknown, [string, string, string, number]>(
      "INSERT INTO fleet_records (collection, key, json, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (collection, key) DO NOTHING",
    );
    this.deleteQ = db.query<unknown, [string, string]>("DELETE FROM fleet_records WHERE collection = ? AND key = ?");
  }

  private decode(key: string, json: string): T | undefined {
    return readRecord(this.codec, this.name, key, json);
  }

  async list(): Promise<T[]> {
    return this.listQ.all(this.name).flatMap((row) => {
      const v = this.decode(row.key, row.json);
      return v === undefined ? [] : [v];
    });
  }

  async get(key: string): Promise<T | undefined> {
    const row = this.getQ.get(this.name, key);
    return row ? this.decode(key, row.json) : undefined;
  }

  async put(key: string, value: T): Promise<void> {
    this.putQ.run(this.name, key, this.codec.encode(value), Date.now());
  }

  async putIfAbsent(key: string, value: T): Promise<boolean> {
    return this.insertQ.run(this.name, key, this.codec.encode(value), Date.now()).changes > 0;
  }

  async delete(key: string): Promise<boolean> {
    return this.deleteQ.run(this.name, key).changes > 0;
  }
}

export class SqliteFleetStore implements FleetStore {
  readonly models: Collection<RecordTypes["models"]>;
  readonly cordons: Collection<RecordTypes["cordons"]>;
  readonly drains: Collection<RecordTypes["drains"]>;
  readonly nodes: Collection<RecordTypes["nodes"]>;
  readonly replicas: Collection<RecordTypes["replicas"]>;
  readonly bindings: Collection<RecordTypes["bindings"]>;
  private readonly db: Database;

  /** Open (creating) the store in `dataDir`; ":memory:" for tests that need no file. */
  constructor(dataDir: string) {
    if (dataDir !== ":memory:") mkdirSync(dataDir, { recursive: true });
    this.db = new Database(dataDir === ":memory:" ? ":memory:" : join(dataDir, FLEET_DB_FILE), { create: true, strict: true });
    this.db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
    this.db.exec("PRAGMA journal_mode = WAL");
    // WAL with synchronous=NORMAL may lose the last commits on power loss, never consistency; FULL keeps them (writes are rare here).
    this.db.exec("PRAGMA synchronous = FULL");
    this.db.exec(
      "CREATE TABLE IF NOT EXISTS fleet_records (collection TEXT NOT NULL, key TEXT NOT NULL, json TEXT NOT NULL, updated_at INTEGER NOT NULL, PRIMARY KEY (collection, key)) WITHOUT ROWID",
    );
    this.models = new SqliteCollection(this.db, "models", RECORD_CODECS.models);
    this.cordons = new SqliteCollection(this.db, "cordons", RECORD_CODECS.cordons);
    this.drains = new SqliteCollection(this.db, "drains", RECORD_CODECS.drains);
    this.nodes = new SqliteCollection(this.db, "nodes", RECORD_CODECS.nodes);
    this.replicas = new SqliteCollection(this.db, "replicas", RECORD_CODECS.replicas);
    this.bindings = new SqliteCollection(this.db, "bindings", RECORD_CODECS.bindings);
  }

  /** The journal mode SQLite actually uses ("wal"; "memory" for an in-memory database). */
  journalMode(): string {
    return String(this.db.query<{ journal_mode: string }, []>("PRAGMA journal_mode").get()?.journal_mode);
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
