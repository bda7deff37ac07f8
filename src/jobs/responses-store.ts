/**
 * Stored Responses API responses behind a small async interface, with the
 * embedded backend (bun:sqlite in data_dir, responses.sqlite) here and the
 * shared one on Redis (src/shared-state/redis-responses-store.ts). Every
 * read takes the tenant: another tenant's id is simply absent, as is an
 * expired one. Each tenant's records share a byte budget; storing past it
 * evicts that tenant's oldest. Background responses are claimed with a
 * lease (a runner that died lets its lease lapse, and another takes them).
 */
import type { Database } from "bun:sqlite";
import { recordBytes, type ResponseStatus, type StoredResponse } from "./responses-objects.ts";

/** A compare-and-set change to a record (undefined fields are left as they are; null clears). */
export interface ResponsePatch {
  status: ResponseStatus;
  response?: string;
  input?: string;
  context?: string;
  request?: null;
  owner?: string | null;
  leaseUntilMs?: number | null;
}

export interface ResponsesStore {
  /** Store (or replace) a record, then evict the tenant's oldest records until its records fit `budgetBytes` (the new one is never evicted). */
  put(record: StoredResponse, budgetBytes: number): Promise<void>;
  /** The record, unless absent, another tenant's, or expired at `nowMs`. */
  get(tenant: string, id: string, nowMs: number): Promise<StoredResponse | undefined>;
  /** true when it existed (and was the tenant's). */
  delete(tenant: string, id: string): Promise<boolean>;
  /** Apply `patch` only while the status is one of `from`; the updated record, or undefined. */
  update(tenant: string, id: string, from: readonly ResponseStatus[], patch: ResponsePatch): Promise<StoredResponse | undefined>;
  /** Claim up to `max` background responses for `owner` until `leaseUntilMs`: queued ones and running ones whose lease lapsed, any tenant, oldest first. */
  claim(owner: string, nowMs: number, leaseUntilMs: number, max: number): Promise<StoredResponse[]>;
  /** Extend the lease of the background responses `owner` runs. */
  renew(owner: string, ids: readonly { tenant: string; id: string }[], leaseUntilMs: number): Promise<void>;
  /** Drop expired records. */
  purgeExpired(nowMs: number): Promise<number>;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS responses (
  tenant TEXT NOT NULL,
  id TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  status TEXT NOT NULL,
  response TEXT NOT NULL,
  input TEXT NOT NULL,
  context TEXT NOT NULL,
  request TEXT,
  owner TEXT,
  lease_until_ms INTEGER,
  bytes INTEGER NOT NULL,
  PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS responses_by_tenant_age ON responses (tenant, created_ms);
CREATE INDEX IF NOT EXISTS responses_by_expiry ON responses (expires_ms);
CREATE INDEX IF NOT EXISTS responses_background ON responses (lease_until_ms) WHERE request IS NOT NULL;
`;

interface Row {
  tenant: string;
  id: string;
  created_ms: number;
  expires_ms: number;
  status: ResponseStatus;
  response: string;
  input: string;
  context: string;
  request: string | null;
  owner: string | null;
  lease_until_ms: number | null;
}

function fromRow(r: Row): StoredResponse {
  const out: StoredResponse = { id: r.id, tenant: r.tenant, createdMs: r.created_ms, expiresMs: r.expires_ms, status: r.status, response: r.response, input: r.input, context: r.context };
  if (r.request !== null) out.request = r.request;
  if (r.owner !== null) out.owner = r.owner;
  if (r.lease_until_ms !== null) out.leaseUntilMs = r.lease_until_ms;
  return out;
}

const COLUMNS = "tenant, id, created_ms, expires_ms, status, response, input, context, request, owner, lease_until_ms";

export class SqliteResponsesStore implements ResponsesStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
    db.run(SCHEMA);
  }

  async put(r: StoredResponse, budgetBytes: number): Promise<void> {
    this.#db.transaction(() => {
      this.#db
        .query(`INSERT OR REPLACE INTO responses (${COLUMNS}, bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
        .run(r.tenant, r.id, r.createdMs, r.expiresMs, r.status, r.response, r.input, r.context, r.request ?? null, r.owner ?? null, r.leaseUntilMs ?? null, recordBytes(r));
      this.#evict(r.tenant, r.id, budgetBytes);
    })();
  }

  /** The tenant's oldest records go until its total fits the budget (never `keep`, the one just stored). */
  #evict(tenant: string, keep: string, budgetBytes: number): void {
    let total = this.#db.query<{ total: number | null }, [string]>("SELECT SUM(bytes) AS total FROM responses WHERE tenant = ?").get(tenant)?.total ?? 0;
    if (total <= budgetBytes) return;
    const oldest = this.#db.query<{ id: string; bytes: number }, [string, string]>("SELECT id, bytes FROM responses WHERE tenant = ? AND id <> ? ORDER BY created_ms ASC");
    const del = this.#db.query("DELETE FROM responses WHERE tenant = ? AND id = ?");
    for (const row of oldest.iterate(tenant, keep)) {
      if (total <= budgetBytes) break;
      del.run(tenant, row.id);
      total -= row.bytes;
    }
  }

  async get(tenant: string, id: string, nowMs: number): Promise<StoredResponse | undefined> {
    const row = this.#db.query<Row, [string, string, number]>(`SELECT ${COLUMNS} FROM responses WHERE tenant = ? AND id = ? AND expires_ms > ?`).get(tenant, id, nowMs);
    return row === null ? undefined : fromRow(row);
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    return this.#db.query("DELETE FROM responses WHERE tenant = ? AND id = ?").run(tenant, id).changes === 1;
  }

  async update(tenant: string, id: string, from: readonly ResponseStatus[], p: ResponsePatch): Promise<StoredResponse | undefined> {
    return this.#db.transaction((): StoredResponse | undefined => {
      const row = this.#db.query<Row, [string, string]>(`SELECT ${COLUMNS} FROM responses WHERE tenant = ? AND id = ?`).get(tenant, id);
      if (row === null || !from.includes(row.status)) return undefined;
      const next: StoredResponse = { ...fromRow(row), status: p.status };
      if (p.response !== undefined) next.response = p.response;
      if (p.input !== undefined) next.input = p.input;
      if (p.context !== undefined) next.context = p.context;
      if (p.request === null) delete next.request;
      if (p.owner === null) delete next.owner;
      else if (p.owner !== undefined) next.owner = p.owner;
      if (p.leaseUntilMs === null) delete next.leaseUntilMs;
      else if (p.leaseUntilMs !== undefined) next.leaseUntilMs = p.leaseUntilMs;
      this.#db
        .query("UPDATE responses SET status = ?, response = ?, input = ?, context = ?, request = ?, owner = ?, lease_until_ms = ?, bytes = ? WHERE tenant = ? AND id = ?")
        .run(next.status, next.response, next.input, next.context, next.request ?? null, next.owner ?? null, next.leaseUntilMs ?? null, recordBytes(next), tenant, id);
      return next;
    })();
  }

  async claim(owner: string, nowMs: number, leaseUntilMs: number, max: number): Promise<StoredResponse[]> {
    if (max <= 0) return [];
    return this.#db.transaction((): StoredResponse[] => {
      const rows = this.#db
        .query<Row, [number, number, number]>(
          `SELECT ${COLUMNS} FROM responses WHERE request IS NOT NULL AND status IN ('queued', 'in_progress') AND COALESCE(lease_until_ms, 0) <= ? AND expires_ms > ? ORDER BY created_ms ASC LIMIT ?`,
        )
        .all(nowMs, nowMs, max);
      const take = this.#db.query("UPDATE responses SET owner = ?, lease_until_ms = ? WHERE tenant = ? AND id = ?");
      return rows.map((r) => {
        take.run(owner, leaseUntilMs, r.tenant, r.id);
        return { ...fromRow(r), owner, leaseUntilMs };
      });
    })();
  }

  async renew(owner: string, ids: readonly { tenant: string; id: string }[], leaseUntilMs: number): Promise<void> {
    const q = this.#db.query("UPDATE responses SET lease_until_ms = ? WHERE tenant = ? AND id = ? AND owner = ?");
    this.#db.transaction(() => {
      for (const { tenant, id } of ids) q.run(leaseUntilMs, tenant, id, owner);
    })();
  }

  async purgeExpired(nowMs: number): Promise<number> {
    return this.#db.query("DELETE FROM responses WHERE expires_ms <= ?").run(nowMs).changes;
  }
}
