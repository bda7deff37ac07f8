/**
 * Stored Responses API responses on Redis, shared by every gateway: a
 * follow-up naming a response any gateway stored is expanded by whichever
 * gateway it reaches. Per record one hash (the record's body, status, a
 * version for compare-and-set, a background run's owner and lease, its
 * expiry) and its input items as a list with an item-id index beside it, so
 * a page of input_items reads only that page; per tenant a sorted set of
 * its ids by expiry and a hash of their sizes with the running total, so
 * that storing past the tenant's budget evicts its oldest in the same
 * script; one sorted set of the background responses to run, by lease end
 * (0: queued). Every step that must not interleave is one script
 * (redis-responses-scripts.ts, with the key layout). A follow-up's record
 * keeps its own turn and names the one it follows; since Redis expires each
 * key on its own clock, storing a follow-up extends its chain's records to
 * outlive it, and removing a record copies its conversation into its
 * followers first. A record written by the earlier layout (items inside its body)
 * is read as it is and moves to this one when next written.
 */

import {
  type ConversationLink,
  expandedInput,
  type InputItemsPage,
  type InputItemsQuery,
  inputItemsPage,
  type ResponseRecord,
  type ResponseStatus,
  type StoredResponse,
} from "../jobs/responses-objects.ts";
import type { ResponsePatch, ResponsesStore } from "../jobs/responses-store.ts";
import type { RedisConnection } from "./redis-connection.ts";
import { CLAIM, CONVERSATION, DELETE, INPUT_ITEMS, PUT, RENEW, UPDATE } from "./redis-responses-scripts.ts";

/** A compare-and-set that keeps losing to other writers gives up after this many reads. */
const MAX_CAS_TRIES = 50;

/** A follow-up's chain is at most this many records; past it a follow-up stores its whole conversation (a new chain), so walks stay bounded. */
export const MAX_CHAIN_RECORDS = 100;

/** What `json` holds: the record less the fields and keys of its own (its input items are a list, its turn and the id it follows are fields). */
type Body = Omit<StoredResponse, "owner" | "leaseUntilMs" | "status" | "input" | "context" | "previousId">;

/** A record as read back: `old` holds what a record of the earlier layout keeps inside its json. */
interface Read {
  record: ResponseRecord;
  v: string;
  inputBytes: number;
  old?: { input: string; context: string };
}

const FIELDS = ["json", "status", "v", "owner", "lease", "ib", "prev"] as const;

function bodyOf(r: ResponseRecord): string {
  const { owner: _owner, leaseUntilMs: _lease, status: _status, previousId: _previous, ...body } = r;
  return JSON.stringify(body);
}

/** The body of either layout, with the earlier layout's input and conversation taken out. */
function parseBody(json: string): { body: Body; old?: { input: string; context: string } } {
  const { input, context, ...body } = JSON.parse(json) as Body & { input?: string; context?: string };
  return input === undefined && context === undefined ? { body } : { body, old: { input: input ?? "[]", context: context ?? "[]" } };
}

/** The response's output items (JSON array): what follows its turn in a conversation. */
function outputOf(response: string): string {
  const output = (JSON.parse(response) as { output?: unknown }).output;
  return JSON.stringify(Array.isArray(output) ? output : []);
}

/** A record's bytes for the tenant's budget, all but its turn (the script adds that, having joined it to its chain or not). */
function bytesBesidesTurn(r: ResponseRecord, inputBytes: number, out: string): number {
  return r.response.length + inputBytes + out.length + (r.request?.length ?? 0) + r.id.length;
}

/** PUT and UPDATE's item arguments: the count and the items (JSON each), then the count and the (item id, index) pairs of the cursor index. */
function itemArgs(input: string): string[] {
  const items = JSON.parse(input) as unknown[];
  const at = new Map<string, [number, number]>();
  const list = items.map((item, i) => {
    const id = typeof item === "object" && item !== null ? (item as { id?: unknown }).id : undefined;
    if (typeof id === "string") {
      const seen = at.get(id);
      if (seen === undefined) at.set(id, [i, i]);
      else seen[1] = i;
    }
    return JSON.stringify(item);
  });
  const pairs: string[] = [];
  for (const [id, [first, last]] of at) pairs.push(id, first === last ? String(first) : `${first}:${last}`);
  return [String(list.length), ...list, String(at.size), ...pairs];
}

function toRun(r: { status: ResponseStatus; request?: string }): 0 | 1 {
  return r.request !== undefined && (r.status === "queued" || r.status === "in_progress") ? 1 : 0;
}

/** Records are kept by Redis this long past their expiry (llmgw checks the expiry itself). */
const EXPIRY_SLACK_MS = 60_000;

export class RedisResponsesStore implements ResponsesStore {
  readonly #r: RedisConnection;
  readonly #p: string;

  constructor(redis: RedisConnection, prefix: string) {
    this.#r = redis;
    this.#p = `${prefix}resp:`;
  }

  /** Length-prefixed, so no tenant and id pair can spell another's. */
  #member(tenant: string, id: string): string {
    return `${this.#m(tenant)}${id}`;
  }
  #m(tenant: string): string {
    return `${tenant.length}:${tenant}:`;
  }
  #key(kind: "r" | "i" | "x", tenant: string, id: string): string {
    return `${this.#p}${kind}:${this.#member(tenant, id)}`;
  }
  #tenant(tenant: string, part: "ids" | "sizes" | "total"): string {
    return `${this.#p}t:${part}:${tenant.length}:${tenant}`;
  }
  get #background(): string {
    return `${this.#p}background`;
  }

  #keys(tenant: string, id: string): string[] {
    return [
      this.#key("r", tenant, id),
      this.#tenant(tenant, "ids"),
      this.#tenant(tenant, "sizes"),
      this.#tenant(tenant, "total"),
      this.#background,
      this.#key("i", tenant, id),
      this.#key("x", tenant, id),
    ];
  }

  async put(r: StoredResponse, budgetBytes: number): Promise<void> {
    const t = r.tenant;
    const ttl = Math.max(1, r.expiresMs - Date.now()) + EXPIRY_SLACK_MS;
    const { input: _input, context: _context, ...record } = r;
    const out = outputOf(r.response);
    const store = (context: string, prev: string) => {
      const args = [
        bodyOf(record),
        r.status,
        bytesBesidesTurn(record, r.input.length, out),
        r.expiresMs,
        ttl,
        budgetBytes,
        r.id,
        this.#p,
        this.#m(t),
        toRun(r),
        Date.now(),
        r.input.length,
      ];
      return this.#r.eval(PUT, this.#keys(t, r.id), [...args, context, out, prev, MAX_CHAIN_RECORDS, ...itemArgs(r.input)]);
    };
    if (Number(await store(r.context, r.previousId ?? "")) === 2) await store(await this.#afterEarlier(t, r.previousId!, r.context), "");
  }

  /** A follow-up of a record of the earlier layout (which holds its whole conversation) stores its whole conversation: it starts a chain. */
  async #afterEarlier(tenant: string, previousId: string, context: string): Promise<string> {
    const got = await this.#read(tenant, previousId);
    if (got?.old === undefined) return context;
    return JSON.stringify(expandedInput([{ context: got.old.context, response: got.record.response }], JSON.parse(context) as unknown[]));
  }

  /** One script walks the chain (bounded): the record and each one it follows. */
  async conversation(tenant: string, id: string, nowMs: number): Promise<{ status: ResponseStatus; links: ConversationLink[] } | undefined> {
    const got = (await this.#r.eval(CONVERSATION, [this.#key("r", tenant, id)], [nowMs, id, this.#p, this.#m(tenant), MAX_CHAIN_RECORDS])) as (
      | string
      | number
    )[];
    const code = Number(got[0]);
    if (code === 0) return undefined;
    if (code === 1) {
      const old = await this.#read(tenant, id);
      if (old === undefined || old.record.expiresMs <= nowMs) return undefined;
      return { status: old.record.status, links: [{ context: old.old?.context ?? "[]", response: old.record.response }] };
    }
    const links: ConversationLink[] = [];
    for (let i = got.length - 2; i >= 2; i -= 2) links.push({ context: String(got[i]), response: `{"output":${String(got[i + 1])}}` });
    return { status: String(got[1]) as ResponseStatus, links };
  }

  /** A page reads its own items: one script finds the cursor's index and returns one LRANGE. */
  async inputItems(tenant: string, id: string, nowMs: number, query: InputItemsQuery): Promise<InputItemsPage> {
    const asc = query.order === "asc";
    const keys = [this.#key("r", tenant, id), this.#key("i", tenant, id), this.#key("x", tenant, id)];
    const [code, got] = (await this.#r.eval(INPUT_ITEMS, keys, [nowMs, query.after ?? "", query.limit, asc ? 1 : 0])) as [number, string[] | undefined];
    if (Number(code) === 0) return { missing: "response" };
    if (Number(code) === 2) return { missing: "after" };
    if (Number(code) === 1) return this.#earlierLayoutItems(tenant, id, nowMs, query);
    const rows = asc ? (got ?? []) : [...(got ?? [])].reverse();
    const data = rows.slice(0, query.limit).map((r) => JSON.parse(r) as Record<string, unknown>);
    const idOf = (item: Record<string, unknown> | undefined) => (item === undefined ? null : (item.id ?? null));
    return { page: { object: "list", data, first_id: idOf(data[0]), last_id: idOf(data[data.length - 1]), has_more: rows.length > query.limit } };
  }

  /** A record written by the earlier layout keeps its items inside its json until it is next written. */
  async #earlierLayoutItems(tenant: string, id: string, nowMs: number, query: InputItemsQuery): Promise<InputItemsPage> {
    const got = await this.#read(tenant, id);
    if (got === undefined || got.record.expiresMs <= nowMs) return { missing: "response" };
    const page = inputItemsPage(JSON.parse(got.old?.input ?? "[]") as Record<string, unknown>[], query);
    return page === undefined ? { missing: "after" } : { page };
  }

  async #read(tenant: string, id: string): Promise<Read | undefined> {
    const [json, status, v, owner, lease, ib, prev] = ((await this.#r.send("HMGET", [this.#key("r", tenant, id), ...FIELDS])) ?? []) as (string | null)[];
    if (json === null || json === undefined) return undefined;
    const { body, old } = parseBody(json);
    const record: ResponseRecord = { ...body, status: status as ResponseStatus };
    if (prev !== null && prev !== undefined) record.previousId = prev;
    if (owner !== null && owner !== undefined) record.owner = owner;
    if (lease !== null && lease !== undefined) record.leaseUntilMs = Number(lease);
    const read: Read = { record, v: v ?? "0", inputBytes: old?.input.length ?? Number(ib ?? 0) };
    if (old !== undefined) read.old = old;
    return read;
  }

  async get(tenant: string, id: string, nowMs: number): Promise<ResponseRecord | undefined> {
    const got = await this.#read(tenant, id);
    return got === undefined || got.record.expiresMs <= nowMs ? undefined : got.record;
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    const keys = [this.#key("r", tenant, id), this.#tenant(tenant, "ids"), this.#tenant(tenant, "sizes"), this.#tenant(tenant, "total"), this.#background];
    return Number(await this.#r.eval(DELETE, keys, [id, this.#p, this.#m(tenant), MAX_CHAIN_RECORDS])) === 1;
  }

  async update(tenant: string, id: string, from: readonly ResponseStatus[], p: ResponsePatch): Promise<ResponseRecord | undefined> {
    for (let i = 0; i < MAX_CAS_TRIES; i++) {
      const got = await this.#read(tenant, id);
      if (got === undefined || !from.includes(got.record.status)) return undefined;
      const next: ResponseRecord = { ...got.record, status: p.status };
      if (p.response !== undefined) next.response = p.response;
      if (p.context !== undefined) {
        if (p.previousId === undefined) delete next.previousId;
        else next.previousId = p.previousId;
      }
      if (p.request === null) delete next.request;
      if (p.owner === null) delete next.owner;
      else if (p.owner !== undefined) next.owner = p.owner;
      if (p.leaseUntilMs === null) delete next.leaseUntilMs;
      else if (p.leaseUntilMs !== undefined) next.leaseUntilMs = p.leaseUntilMs;
      // A record of the earlier layout moves its items to their list, and its conversation to its own field, as it is rewritten.
      const input = p.input ?? got.old?.input;
      const context = p.context ?? got.old?.context;
      const inputBytes = input?.length ?? got.inputBytes;
      const out = outputOf(next.response);
      const update = (turn: string | undefined, prev: string) => {
        const args = [
          got.v,
          bodyOf(next),
          next.status,
          bytesBesidesTurn(next, inputBytes, out),
          id,
          next.owner ?? "",
          next.leaseUntilMs ?? "",
          this.#member(tenant, id),
          toRun(next),
          next.expiresMs,
          inputBytes,
        ];
        const chain = [this.#p, this.#m(tenant), MAX_CHAIN_RECORDS, turn === undefined ? 0 : 1, turn ?? "", out, prev];
        return this.#r.eval(UPDATE, this.#keys(tenant, id), [...args, ...chain, input === undefined ? 0 : 1, ...(input === undefined ? [] : itemArgs(input))]);
      };
      const prev = p.context === undefined ? "" : (p.previousId ?? "");
      let done = Number(await update(context, prev));
      if (done === 2) {
        delete next.previousId;
        done = Number(await update(await this.#afterEarlier(tenant, prev, context!), ""));
      }
      if (done === 1) return next;
    }
    throw new Error(`responses store: the record ${id} kept changing under a compare-and-set`);
  }

  async claim(owner: string, nowMs: number, leaseUntilMs: number, max: number): Promise<ResponseRecord[]> {
    if (max <= 0) return [];
    const out = (await this.#r.eval(CLAIM, [this.#background], [nowMs, leaseUntilMs, owner, max, `${this.#p}r:`])) as string[] | null;
    const claimed: ResponseRecord[] = [];
    for (let i = 0; out && i + 1 < out.length; i += 2) {
      const record: ResponseRecord = { ...parseBody(out[i + 1]!).body, status: "queued", owner, leaseUntilMs };
      // The status may have been in_progress (a runner that died): what matters is that it is to run.
      if (record.expiresMs > nowMs) claimed.push(record);
    }
    return claimed;
  }

  async renew(owner: string, ids: readonly { tenant: string; id: string }[], leaseUntilMs: number): Promise<void> {
    if (ids.length === 0) return;
    await this.#r.eval(RENEW, [this.#background], [owner, leaseUntilMs, `${this.#p}r:`, ...ids.map(({ tenant, id }) => this.#member(tenant, id))]);
  }

  /** Redis expires records itself; the tenants' indexes drop expired ids as the tenant stores more. */
  async purgeExpired(): Promise<number> {
    return 0;
  }
}
