/**
 * Stored Responses API responses behind a small async interface, with the
 * embedded backend (bun:sqlite in data_dir, responses.sqlite) here and the
 * shared one on Redis (src/shared-state/redis-responses-store.ts). Every
 * read takes the tenant: another tenant's id is simply absent, as is an
 * expired one. Each tenant's records share a byte budget; storing past it
 * evicts that tenant's oldest. Background responses are claimed with a
 * lease (a runner that died lets its lease lapse, and another takes them).
 *
 * The embedded layout keeps what is read often apart from what is large:
 * `responses` holds a record's small fields ahead of its large ones (so a
 * status read never walks a large value's overflow pages), its input items
 * are rows of their own (a page of input_items reads only that page), and
 * the background responses still to run are rows of `response_runs` (an
 * idle runner's claim is one lookup in an empty index, whatever the size of
 * the store). A follow-up stores only its own turn and names the response
 * it follows; removing a response that others follow first copies its
 * conversation into them, so a chain never loses its history.
 */
import type { Database } from "bun:sqlite";
import {
  type ConversationLink,
  expandedInput,
  type InputItemsPage,
  type InputItemsQuery,
  type ResponseRecord,
  type ResponseStatus,
  recordBytes,
  type StoredResponse,
} from "./responses-objects.ts";
import { migrateResponsesSchema } from "./sqlite-responses-migrate.ts";

/** A compare-and-set change to a record (undefined fields are left as they are; null clears). */
export interface ResponsePatch {
  status: ResponseStatus;
  response?: string;
  input?: string;
  context?: string;
  /** With `context`: the response the conversation continues (a background follow-up's answer). */
  previousId?: string;
  request?: null;
  owner?: string | null;
  leaseUntilMs?: number | null;
}

export interface ResponsesStore {
  /** Store (or replace) a record, then evict the tenant's oldest records until its records fit `budgetBytes` (the new one is never evicted). */
  put(record: StoredResponse, budgetBytes: number): Promise<void>;
  /** The record, unless absent, another tenant's, or expired at `nowMs`. */
  get(tenant: string, id: string, nowMs: number): Promise<ResponseRecord | undefined>;
  /** The record's status and the conversation a follow-up of it continues (oldest link first, ending with it); undefined as for get. */
  conversation(tenant: string, id: string, nowMs: number): Promise<{ status: ResponseStatus; links: ConversationLink[] } | undefined>;
  /** One page of the record's own input items (GET …/input_items). */
  inputItems(tenant: string, id: string, nowMs: number, query: InputItemsQuery): Promise<InputItemsPage>;
  /** true when it existed (and was the tenant's). */
  delete(tenant: string, id: string): Promise<boolean>;
  /** Apply `patch` only while the status is one of `from`; the updated record, or undefined. */
  update(tenant: string, id: string, from: readonly ResponseStatus[], patch: ResponsePatch): Promise<ResponseRecord | undefined>;
  /** Claim up to `max` background responses for `owner` until `leaseUntilMs`: queued ones and running ones whose lease lapsed, any tenant, oldest first. */
  claim(owner: string, nowMs: number, leaseUntilMs: number, max: number): Promise<ResponseRecord[]>;
  /** Extend the lease of the background responses `owner` runs. */
  renew(owner: string, ids: readonly { tenant: string; id: string }[], leaseUntilMs: number): Promise<void>;
  /** Drop expired records. */
  purgeExpired(nowMs: number): Promise<number>;
}

/** Small columns first: SQLite reads a row's columns in order, so a large value before a small one is walked to reach it. */
const RESPONSES_SCHEMA = `
CREATE TABLE IF NOT EXISTS responses (
  tenant TEXT NOT NULL,
  id TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  status TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  previous_id TEXT,
  request TEXT,
  response TEXT NOT NULL,
  context TEXT NOT NULL,
  PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS responses_by_tenant_age ON responses (tenant, created_ms, bytes);
CREATE INDEX IF NOT EXISTS responses_by_expiry ON responses (expires_ms);
CREATE INDEX IF NOT EXISTS responses_by_previous ON responses (tenant, previous_id) WHERE previous_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS response_items (
  tenant TEXT NOT NULL,
  id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  item_id TEXT NOT NULL,
  item TEXT NOT NULL,
  PRIMARY KEY (tenant, id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS response_items_by_item_id ON response_items (tenant, id, item_id);
CREATE TABLE IF NOT EXISTS response_runs (
  tenant TEXT NOT NULL,
  id TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  lease_until_ms INTEGER NOT NULL,
  owner TEXT,
  PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS response_runs_by_lease ON response_runs (lease_until_ms, created_ms);
`;

/** The claim reads only the narrow run table: due runs are a range of its lease index (empty when nothing waits). */
export const CLAIM_SQL = "SELECT tenant, id FROM response_runs WHERE lease_until_ms <= ? AND expires_ms > ? ORDER BY created_ms ASC LIMIT ?";

interface Row {
  tenant: string;
  id: string;
  created_ms: number;
  expires_ms: number;
  status: ResponseStatus;
  previous_id: string | null;
  request: string | null;
  response: string;
  owner: string | null;
  lease_until_ms: number | null;
}

const RECORD_SQL = `SELECT r.tenant, r.id, r.created_ms, r.expires_ms, r.status, r.previous_id, r.request, r.response, u.owner, u.lease_until_ms
  FROM responses r LEFT JOIN response_runs u ON u.tenant = r.tenant AND u.id = r.id WHERE r.tenant = ? AND r.id = ?`;

function fromRow(r: Row): ResponseRecord {
  const out: ResponseRecord = { id: r.id, tenant: r.tenant, createdMs: r.created_ms, expiresMs: r.expires_ms, status: r.status, response: r.response };
  if (r.previous_id !== null) out.previousId = r.previous_id;
  if (r.request !== null) out.request = r.request;
  if (r.owner !== null) out.owner = r.owner;
  if (r.lease_until_ms !== null) out.leaseUntilMs = r.lease_until_ms;
  return out;
}

function toRun(r: { status: ResponseStatus; request?: string }): boolean {
  return r.request !== undefined && (r.status === "queued" || r.status === "in_progress");
}

/** The input items as rows: each keeps its id apart, for the `after` cursor. */
function itemRows(input: string): { itemId: string; item: string }[] {
  const items = JSON.parse(input) as unknown[];
  return items.map((item) => {
    const id = typeof item === "object" && item !== null ? (item as { id?: unknown }).id : undefined;
    return { itemId: typeof id === "string" ? id : "", item: JSON.stringify(item) };
  });
}

export class SqliteResponsesStore implements ResponsesStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
    migrateResponsesSchema(db, RESPONSES_SCHEMA);
  }

  async put(r: StoredResponse, budgetBytes: number): Promise<void> {
    const items = itemRows(r.input);
    this.#db.transaction(() => {
      this.#db.query("DELETE FROM response_items WHERE tenant = ? AND id = ?").run(r.tenant, r.id);
      this.#db.query("DELETE FROM response_runs WHERE tenant = ? AND id = ?").run(r.tenant, r.id);
      this.#db
        .query(
          "INSERT OR REPLACE INTO responses (tenant, id, created_ms, expires_ms, status, bytes, previous_id, request, response, context) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .run(
          r.tenant,
          r.id,
          r.createdMs,
          r.expiresMs,
          r.status,
          recordBytes(r),
          this.#present(r.tenant, r.previousId),
          r.request ?? null,
          r.response,
          r.context,
        );
      this.#insertItems(r.tenant, r.id, items);
      if (toRun(r)) {
        this.#db
          .query("INSERT INTO response_runs (tenant, id, created_ms, expires_ms, lease_until_ms, owner) VALUES (?, ?, ?, ?, ?, ?)")
          .run(r.tenant, r.id, r.createdMs, r.expiresMs, r.leaseUntilMs ?? 0, r.owner ?? null);
      }
      this.#evict(r.tenant, r.id, budgetBytes);
    })();
  }

  /**
   * The previous response, when it is still stored. One deleted while its
   * follow-up was being answered leaves the follow-up its own turn alone:
   * the client removed that history itself.
   */
  #present(tenant: string, previousId: string | undefined): string | null {
    if (previousId === undefined) return null;
    return this.#db.query("SELECT 1 FROM responses WHERE tenant = ? AND id = ?").get(tenant, previousId) === null ? null : previousId;
  }

  #insertItems(tenant: string, id: string, items: readonly { itemId: string; item: string }[]): void {
    const q = this.#db.query("INSERT INTO response_items (tenant, id, seq, item_id, item) VALUES (?, ?, ?, ?, ?)");
    items.forEach(({ itemId, item }, seq) => q.run(tenant, id, seq, itemId, item));
  }

  /** The tenant's oldest records go until its total fits the budget (never `keep`, the one just stored). */
  #evict(tenant: string, keep: string, budgetBytes: number): void {
    let total = this.#db.query<{ total: number | null }, [string]>("SELECT SUM(bytes) AS total FROM responses WHERE tenant = ?").get(tenant)?.total ?? 0;
    if (total <= budgetBytes) return;
    const oldest = this.#db
      .query<{ id: string; bytes: number }, [string, string]>("SELECT id, bytes FROM responses WHERE tenant = ? AND id <> ? ORDER BY created_ms ASC")
      .all(tenant, keep);
    for (const row of oldest) {
      if (total <= budgetBytes) break;
      total += this.#remove(tenant, row.id) - row.bytes;
    }
  }

  /** Delete one record with its items and run; the records that follow it get its conversation first. Returns the bytes they grew by. */
  #remove(tenant: string, id: string): number {
    const grown = this.#detachFollowers(tenant, id);
    this.#db.query("DELETE FROM responses WHERE tenant = ? AND id = ?").run(tenant, id);
    this.#db.query("DELETE FROM response_items WHERE tenant = ? AND id = ?").run(tenant, id);
    this.#db.query("DELETE FROM response_runs WHERE tenant = ? AND id = ?").run(tenant, id);
    return grown;
  }

  /** The records naming (tenant, id) as their previous response hold its whole conversation from now on. */
  #detachFollowers(tenant: string, id: string): number {
    const followers = this.#db
      .query<{ id: string; context: string }, [string, string]>("SELECT id, context FROM responses WHERE tenant = ? AND previous_id = ?")
      .all(tenant, id);
    if (followers.length === 0) return 0;
    const links = this.#links(tenant, id);
    const before = links === undefined ? [] : expandedInput(links, []);
    let grown = 0;
    const set = this.#db.query("UPDATE responses SET context = ?, previous_id = NULL, bytes = bytes + ? WHERE tenant = ? AND id = ?");
    for (const f of followers) {
      const context = JSON.stringify([...before, ...(JSON.parse(f.context) as unknown[])]);
      grown += context.length - f.context.length;
      set.run(context, context.length - f.context.length, tenant, f.id);
    }
    return grown;
  }

  /** The conversation up to and including (tenant, id), oldest first; earlier records are read whatever their expiry (a purge detaches followers first). */
  #links(tenant: string, id: string): ConversationLink[] | undefined {
    const q = this.#db.query<{ previous_id: string | null; context: string; response: string }, [string, string]>(
      "SELECT previous_id, context, response FROM responses WHERE tenant = ? AND id = ?",
    );
    const links: ConversationLink[] = [];
    const seen = new Set<string>();
    for (let at: string | null = id; at !== null; ) {
      if (seen.has(at)) return undefined;
      seen.add(at);
      const row = q.get(tenant, at);
      if (row === null) return undefined;
      links.push({ context: row.context, response: row.response });
      at = row.previous_id;
    }
    return links.reverse();
  }

  async get(tenant: string, id: string, nowMs: number): Promise<ResponseRecord | undefined> {
    const row = this.#db.query<Row, [string, string]>(RECORD_SQL).get(tenant, id);
    return row === null || row.expires_ms <= nowMs ? undefined : fromRow(row);
  }

  async conversation(tenant: string, id: string, nowMs: number): Promise<{ status: ResponseStatus; links: ConversationLink[] } | undefined> {
    return this.#db.transaction(() => {
      const head = this.#db
        .query<{ status: ResponseStatus }, [string, string, number]>("SELECT status FROM responses WHERE tenant = ? AND id = ? AND expires_ms > ?")
        .get(tenant, id, nowMs);
      if (head === null) return undefined;
      const links = this.#links(tenant, id);
      return links === undefined ? undefined : { status: head.status, links };
    })();
  }

  async inputItems(tenant: string, id: string, nowMs: number, query: InputItemsQuery): Promise<InputItemsPage> {
    if (this.#db.query("SELECT 1 FROM responses WHERE tenant = ? AND id = ? AND expires_ms > ?").get(tenant, id, nowMs) === null)
      return { missing: "response" };
    const asc = query.order === "asc";
    let bound = asc ? -1 : Number.MAX_SAFE_INTEGER;
    if (query.after !== undefined) {
      // The first item with that id in the page order, as a cursor over a list finds it.
      const at = this.#db
        .query<{ seq: number | null }, [string, string, string]>(
          `SELECT ${asc ? "MIN" : "MAX"}(seq) AS seq FROM response_items WHERE tenant = ? AND id = ? AND item_id = ?`,
        )
        .get(tenant, id, query.after);
      if (at?.seq === null || at?.seq === undefined) return { missing: "after" };
      bound = at.seq;
    }
    const rows = this.#db
      .query<{ item: string }, [string, string, number, number]>(
        `SELECT item FROM response_items WHERE tenant = ? AND id = ? AND seq ${asc ? ">" : "<"} ? ORDER BY seq ${asc ? "ASC" : "DESC"} LIMIT ?`,
      )
      .all(tenant, id, bound, query.limit + 1);
    const data = rows.slice(0, query.limit).map((r) => JSON.parse(r.item) as Record<string, unknown>);
    const idOf = (item: Record<string, unknown> | undefined) => (item === undefined ? null : (item.id ?? null));
    return { page: { object: "list", data, first_id: idOf(data[0]), last_id: idOf(data[data.length - 1]), has_more: rows.length > query.limit } };
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    return this.#db.transaction((): boolean => {
      if (this.#db.query("SELECT 1 FROM responses WHERE tenant = ? AND id = ?").get(tenant, id) === null) return false;
      this.#remove(tenant, id);
      return true;
    })();
  }

  async update(tenant: string, id: string, from: readonly ResponseStatus[], p: ResponsePatch): Promise<ResponseRecord | undefined> {
    return this.#db.transaction((): ResponseRecord | undefined => {
      const row = this.#db.query<Row, [string, string]>(RECORD_SQL).get(tenant, id);
      if (row === null || !from.includes(row.status)) return undefined;
      const old = fromRow(row);
      const next: ResponseRecord = { ...old, status: p.status };
      if (p.response !== undefined) next.response = p.response;
      if (p.request === null) delete next.request;
      if (p.owner === null) delete next.owner;
      else if (p.owner !== undefined) next.owner = p.owner;
      if (p.leaseUntilMs === null) delete next.leaseUntilMs;
      else if (p.leaseUntilMs !== undefined) next.leaseUntilMs = p.leaseUntilMs;
      let grown = next.response.length - old.response.length + (next.request?.length ?? 0) - (old.request?.length ?? 0);
      if (p.context !== undefined || p.input !== undefined) {
        const sizes = this.#db
          .query<{ bytes: number; context: number }, [string, string]>("SELECT bytes, length(context) AS context FROM responses WHERE tenant = ? AND id = ?")
          .get(tenant, id)!;
        const oldInput = Math.max(0, sizes.bytes - old.response.length - sizes.context - (old.request?.length ?? 0) - id.length);
        if (p.context !== undefined) {
          grown += p.context.length - sizes.context;
          this.#db
            .query("UPDATE responses SET context = ?, previous_id = ? WHERE tenant = ? AND id = ?")
            .run(p.context, this.#present(tenant, p.previousId), tenant, id);
        }
        if (p.input !== undefined) {
          grown += p.input.length - oldInput;
          this.#db.query("DELETE FROM response_items WHERE tenant = ? AND id = ?").run(tenant, id);
          this.#insertItems(tenant, id, itemRows(p.input));
        }
      }
      this.#db
        .query("UPDATE responses SET status = ?, response = ?, request = ?, bytes = bytes + ? WHERE tenant = ? AND id = ?")
        .run(next.status, next.response, next.request ?? null, grown, tenant, id);
      if (toRun(next)) {
        this.#db
          .query("INSERT OR REPLACE INTO response_runs (tenant, id, created_ms, expires_ms, lease_until_ms, owner) VALUES (?, ?, ?, ?, ?, ?)")
          .run(tenant, id, next.createdMs, next.expiresMs, next.leaseUntilMs ?? 0, next.owner ?? null);
      } else this.#db.query("DELETE FROM response_runs WHERE tenant = ? AND id = ?").run(tenant, id);
      return next;
    })();
  }

  async claim(owner: string, nowMs: number, leaseUntilMs: number, max: number): Promise<ResponseRecord[]> {
    if (max <= 0) return [];
    return this.#db.transaction((): ResponseRecord[] => {
      const due = this.#db.query<{ tenant: string; id: string }, [number, number, number]>(CLAIM_SQL).all(nowMs, nowMs, max);
      const take = this.#db.query("UPDATE response_runs SET owner = ?, lease_until_ms = ? WHERE tenant = ? AND id = ?");
      const read = this.#db.query<Row, [string, string]>(RECORD_SQL);
      const out: ResponseRecord[] = [];
      for (const { tenant, id } of due) {
        take.run(owner, leaseUntilMs, tenant, id);
        const row = read.get(tenant, id);
        if (row !== null) out.push(fromRow(row));
      }
      return out;
    })();
  }

  async renew(owner: string, ids: readonly { tenant: string; id: string }[], leaseUntilMs: number): Promise<void> {
    const q = this.#db.query("UPDATE response_runs SET lease_until_ms = ? WHERE tenant = ? AND id = ? AND owner = ?");
    this.#db.transaction(() => {
      for (const { tenant, id } of ids) q.run(leaseUntilMs, tenant, id, owner);
    })();
  }

  /** Newest first, so that a record's followers are gone (or detached) before it goes. */
  async purgeExpired(nowMs: number): Promise<number> {
    return this.#db.transaction((): number => {
      const expired = this.#db
        .query<{ tenant: string; id: string }, [number]>("SELECT tenant, id FROM responses WHERE expires_ms <= ? ORDER BY expires_ms DESC")
        .all(nowMs);
      for (const { tenant, id } of expired) this.#remove(tenant, id);
      return expired.length;
    })();
  }
}
