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
 * (redis-responses-scripts.ts, with the key layout). Records expire on
 * Redis's own clock, each on its own, so a follow-up's record holds its
 * whole conversation here (a chain of records could lose its head to an
 * expiry). A record written by the earlier layout (items inside its body)
 * is read as it is and moves to this one when next written.
 */
import type { ResponsePatch, ResponsesStore } from "../jobs/responses-store.ts";
import {
  expandedInput,
  inputItemsPage,
  recordBytes,
  type ConversationLink,
  type InputItemsPage,
  type InputItemsQuery,
  type ResponseRecord,
  type ResponseStatus,
  type StoredResponse,
} from "../jobs/responses-objects.ts";
import type { RedisConnection } from "./redis-connection.ts";
import { CLAIM, DELETE, INPUT_ITEMS, PUT, RENEW, UPDATE } from "./redis-responses-scripts.ts";

/** A compare-and-set that keeps losing to other writers gives up after this many reads. */
const MAX_CAS_TRIES = 50;

/** What `json` holds: the record less the fields and keys of its own (its input items are a list). */
type Body = Omit<StoredResponse, "owner" | "leaseUntilMs" | "status" | "input">;

/** A record as read back: `oldInput` is the input a record of the earlier layout keeps inside its json. */
interface Read {
  record: ResponseRecord & { context: string };
  v: string;
  inputBytes: number;
  oldInput?: string;
}

const FIELDS = ["json", "status", "v", "owner", "lease", "ib"] as const;

function bodyOf(r: StoredResponse): string {
  const { owner: _owner, leaseUntilMs: _lease, status: _status, input: _input, ...body } = r;
  return JSON.stringify(body);
}

/** The body of either layout, with the earlier layout's input taken out. */
function parseBody(json: string): { body: Body; oldInput?: string } {
  const { input, ...body } = JSON.parse(json) as Body & { input?: string };
  return input === undefined ? { body } : { body, oldInput: input };
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

  async put(given: StoredResponse, budgetBytes: number): Promise<void> {
    const r = await this.#wholeConversation(given);
    const t = r.tenant;
    const keys = [this.#key("r", t, r.id), this.#tenant(t, "ids"), this.#tenant(t, "sizes"), this.#tenant(t, "total"), this.#background, this.#key("i", t, r.id), this.#key("x", t, r.id)];
    const ttl = Math.max(1, r.expiresMs - Date.now()) + EXPIRY_SLACK_MS;
    const args = [bodyOf(r), r.status, recordBytes(r), r.expiresMs, ttl, budgetBytes, r.id, this.#p, this.#m(t), toRun(r), Date.now(), r.input.length, ...itemArgs(r.input)];
    await this.#r.eval(PUT, keys, args);
  }

  /** A follow-up's record with the conversation before its own turn copied in (the previous record holds its own whole). */
  async #wholeConversation(r: StoredResponse): Promise<StoredResponse> {
    if (r.previousId === undefined) return r;
    const { previousId, ...rest } = r;
    const prev = await this.#read(r.tenant, previousId);
    if (prev === undefined) return rest; // deleted since the follow-up was expanded: its own turn is what is left
    const context = JSON.stringify(expandedInput([{ context: prev.record.context, response: prev.record.response }], JSON.parse(r.context) as unknown[]));
    return { ...rest, context };
  }

  async conversation(tenant: string, id: string, nowMs: number): Promise<{ status: ResponseStatus; links: ConversationLink[] } | undefined> {
    const r = await this.get(tenant, id, nowMs);
    return r === undefined ? undefined : { status: r.status, links: [{ context: r.context, response: r.response }] };
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
    const page = inputItemsPage(JSON.parse(got.oldInput ?? "[]") as Record<string, unknown>[], query);
    return page === undefined ? { missing: "after" } : { page };
  }

  async #read(tenant: string, id: string): Promise<Read | undefined> {
    const [json, status, v, owner, lease, ib] = ((await this.#r.send("HMGET", [this.#key("r", tenant, id), ...FIELDS])) ?? []) as (string | null)[];
    if (json === null || json === undefined) return undefined;
    const { body, oldInput } = parseBody(json);
    const record: Read["record"] = { ...body, status: status as ResponseStatus };
    if (owner !== null && owner !== undefined) record.owner = owner;
    if (lease !== null && lease !== undefined) record.leaseUntilMs = Number(lease);
    const read: Read = { record, v: v ?? "0", inputBytes: oldInput?.length ?? Number(ib ?? 0) };
    if (oldInput !== undefined) read.oldInput = oldInput;
    return read;
  }

  async get(tenant: string, id: string, nowMs: number): Promise<(ResponseRecord & { context: string }) | undefined> {
    const got = await this.#read(tenant, id);
    return got === undefined || got.record.expiresMs <= nowMs ? undefined : got.record;
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    const keys = [this.#key("r", tenant, id), this.#tenant(tenant, "ids"), this.#tenant(tenant, "sizes"), this.#tenant(tenant, "total"), this.#background];
    return Number(await this.#r.eval(DELETE, keys, [id, this.#p, this.#m(tenant)])) === 1;
  }

  async update(tenant: string, id: string, from: readonly ResponseStatus[], p: ResponsePatch): Promise<ResponseRecord | undefined> {
    for (let i = 0; i < MAX_CAS_TRIES; i++) {
      const got = await this.#read(tenant, id);
      if (got === undefined || !from.includes(got.record.status)) return undefined;
      const next: Read["record"] = { ...got.record, status: p.status };
      if (p.response !== undefined) next.response = p.response;
      if (p.context !== undefined) next.context = (await this.#wholeConversation({ ...next, input: "[]", context: p.context, ...(p.previousId === undefined ? {} : { previousId: p.previousId }) })).context;
      if (p.request === null) delete next.request;
      if (p.owner === null) delete next.owner;
      else if (p.owner !== undefined) next.owner = p.owner;
      if (p.leaseUntilMs === null) delete next.leaseUntilMs;
      else if (p.leaseUntilMs !== undefined) next.leaseUntilMs = p.leaseUntilMs;
      // A record of the earlier layout moves its items to their list as it is rewritten.
      const input = p.input ?? got.oldInput;
      const inputBytes = input?.length ?? got.inputBytes;
      const bytes = recordBytes({ ...next, input: "" }) + inputBytes;
      const keys = [this.#key("r", tenant, id), this.#tenant(tenant, "sizes"), this.#tenant(tenant, "total"), this.#background, "", this.#key("i", tenant, id), this.#key("x", tenant, id)];
      const stored: StoredResponse = { ...next, input: "" };
      const args = [got.v, bodyOf(stored), next.status, bytes, id, next.owner ?? "", next.leaseUntilMs ?? "", this.#member(tenant, id), toRun(next), next.expiresMs, inputBytes, input === undefined ? 0 : 1, ...(input === undefined ? [] : itemArgs(input))];
      if (Number(await this.#r.eval(UPDATE, keys, args)) === 1) return next;
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
