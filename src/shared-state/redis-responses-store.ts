/**
 * Stored Responses API responses on Redis, shared by every gateway: a
 * follow-up naming a response any gateway stored is expanded by whichever
 * gateway it reaches. Per record one hash (`json`: the record's body;
 * `status`, `v` a version for compare-and-set, `owner` and `lease` of a
 * background run), expiring with the record; per tenant a sorted set of its
 * ids by expiry and a hash of their sizes with the running total, so that
 * storing past the tenant's budget evicts its oldest in the same script;
 * one sorted set of the background responses to run, by lease end (0:
 * queued). Every step that must not interleave is one script. Records
 * expire on Redis's own clock, each on its own, so a follow-up's record
 * holds its whole conversation here (a chain of records could lose its
 * head to an expiry).
 */
import type { ResponsePatch, ResponsesStore } from "../jobs/responses-store.ts";
import {
  expandedInput,
  inputItemsPage,
  recordBytes,
  type ConversationLink,
  type InputItemsPage,
  type InputItemsQuery,
  type ResponseStatus,
  type StoredResponse,
} from "../jobs/responses-objects.ts";
import { RedisScript, type RedisConnection } from "./redis-connection.ts";

/** A compare-and-set that keeps losing to other writers gives up after this many reads. */
const MAX_CAS_TRIES = 50;

/** KEYS: record, tenant ids, tenant sizes, tenant total, background set. ARGV: json, status, bytes, expires, ttl ms, budget, id, record key prefix, background member prefix, background (0|1), now. */
const PUT = new RedisScript(
  "responses-put",
  `local function drop(victim)
  local size = tonumber(redis.call('HGET', KEYS[3], victim) or '0')
  redis.call('DEL', ARGV[8] .. victim)
  redis.call('ZREM', KEYS[2], victim)
  redis.call('HDEL', KEYS[3], victim)
  redis.call('ZREM', KEYS[5], ARGV[9] .. victim)
  return redis.call('DECRBY', KEYS[4], size)
end
for _, victim in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[11])) do
  if victim ~= ARGV[7] then drop(victim) end
end
local old = redis.call('HGET', KEYS[3], ARGV[7])
if old then redis.call('DECRBY', KEYS[4], old) end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'json', ARGV[1], 'status', ARGV[2], 'v', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[7])
redis.call('HSET', KEYS[3], ARGV[7], ARGV[3])
local total = redis.call('INCRBY', KEYS[4], ARGV[3])
while total > tonumber(ARGV[6]) do
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 1)
  local victim = oldest[1]
  if victim == ARGV[7] then victim = oldest[2] end
  if not victim then break end
  total = drop(victim)
end
if ARGV[10] == '1' then redis.call('ZADD', KEYS[5], 0, ARGV[9] .. ARGV[7]) else redis.call('ZREM', KEYS[5], ARGV[9] .. ARGV[7]) end
return 1`,
);

/** KEYS: record, tenant ids, tenant sizes, tenant total, background set. ARGV: id, background member. */
const DELETE = new RedisScript(
  "responses-delete",
  `if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('DEL', KEYS[1])
local size = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('DECRBY', KEYS[4], size)
redis.call('ZREM', KEYS[5], ARGV[2])
return 1`,
);

/** KEYS: record, tenant sizes, tenant total, background set. ARGV: version read, json, status, bytes, id, owner ('' clears), lease ('' clears), background member, still to run (0|1). */
const UPDATE = new RedisScript(
  "responses-update",
  `if redis.call('HGET', KEYS[1], 'v') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'json', ARGV[2], 'status', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'v', 1)
if ARGV[6] == '' then redis.call('HDEL', KEYS[1], 'owner') else redis.call('HSET', KEYS[1], 'owner', ARGV[6]) end
if ARGV[7] == '' then redis.call('HDEL', KEYS[1], 'lease') else redis.call('HSET', KEYS[1], 'lease', ARGV[7]) end
local old = tonumber(redis.call('HGET', KEYS[2], ARGV[5]) or '0')
redis.call('HSET', KEYS[2], ARGV[5], ARGV[4])
redis.call('INCRBY', KEYS[3], tonumber(ARGV[4]) - old)
if ARGV[9] == '0' then redis.call('ZREM', KEYS[4], ARGV[8]) end
return 1`,
);

/** KEYS: background set. ARGV: now, lease end, owner, max, record key prefix. Returns [member, json, owner, lease…]. */
const CLAIM = new RedisScript(
  "responses-claim",
  `local out = {}
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[4]))) do
  local key = ARGV[5] .. m
  local status = redis.call('HGET', key, 'status')
  if status == 'queued' or status == 'in_progress' then
    redis.call('HSET', key, 'owner', ARGV[3], 'lease', ARGV[2])
    redis.call('ZADD', KEYS[1], ARGV[2], m)
    table.insert(out, m)
    table.insert(out, redis.call('HGET', key, 'json'))
  else
    redis.call('ZREM', KEYS[1], m)
  end
end
return out`,
);

/** KEYS: background set. ARGV: owner, lease end, record key prefix, members… */
const RENEW = new RedisScript(
  "responses-renew",
  `for i = 4, #ARGV do
  local key = ARGV[3] .. ARGV[i]
  if redis.call('HGET', key, 'owner') == ARGV[1] then
    redis.call('HSET', key, 'lease', ARGV[2])
    redis.call('ZADD', KEYS[1], 'XX', ARGV[2], ARGV[i])
  end
end
return 1`,
);

type Body = Omit<StoredResponse, "owner" | "leaseUntilMs" | "status">;

function hashOf(v: unknown): Record<string, string> | undefined {
  if (v === null || v === undefined) return undefined;
  if (Array.isArray(v)) {
    if (v.length === 0) return undefined;
    const h: Record<string, string> = {};
    for (let i = 0; i + 1 < v.length; i += 2) h[String(v[i])] = String(v[i + 1]);
    return h;
  }
  const h = v as Record<string, string>;
  return Object.keys(h).length === 0 ? undefined : h;
}

function bodyOf(r: StoredResponse): string {
  const { owner: _owner, leaseUntilMs: _lease, status: _status, ...body } = r;
  return JSON.stringify(body);
}

function toRecord(h: Record<string, string>): StoredResponse {
  const r: StoredResponse = { ...(JSON.parse(h.json!) as Body), status: h.status as ResponseStatus };
  if (h.owner !== undefined) r.owner = h.owner;
  if (h.lease !== undefined) r.leaseUntilMs = Number(h.lease);
  return r;
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
    return `${tenant.length}:${tenant}:${id}`;
  }
  #record(tenant: string, id: string): string {
    return `${this.#p}r:${this.#member(tenant, id)}`;
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
    const keys = [this.#record(t, r.id), this.#tenant(t, "ids"), this.#tenant(t, "sizes"), this.#tenant(t, "total"), this.#background];
    const ttl = Math.max(1, r.expiresMs - Date.now()) + EXPIRY_SLACK_MS;
    const background = r.request !== undefined && (r.status === "queued" || r.status === "in_progress") ? 1 : 0;
    const args = [bodyOf(r), r.status, recordBytes(r), r.expiresMs, ttl, budgetBytes, r.id, `${this.#p}r:${t.length}:${t}:`, `${t.length}:${t}:`, background, Date.now()];
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

  async inputItems(tenant: string, id: string, nowMs: number, query: InputItemsQuery): Promise<InputItemsPage> {
    const r = await this.get(tenant, id, nowMs);
    if (r === undefined) return { missing: "response" };
    const page = inputItemsPage(JSON.parse(r.input) as Record<string, unknown>[], query);
    return page === undefined ? { missing: "after" } : { page };
  }

  async #read(tenant: string, id: string): Promise<{ record: StoredResponse; v: string } | undefined> {
    const h = hashOf(await this.#r.send("HGETALL", [this.#record(tenant, id)]));
    if (h === undefined || h.json === undefined) return undefined;
    return { record: toRecord(h), v: h.v ?? "0" };
  }

  async get(tenant: string, id: string, nowMs: number): Promise<StoredResponse | undefined> {
    const got = await this.#read(tenant, id);
    return got === undefined || got.record.expiresMs <= nowMs ? undefined : got.record;
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    const keys = [this.#record(tenant, id), this.#tenant(tenant, "ids"), this.#tenant(tenant, "sizes"), this.#tenant(tenant, "total"), this.#background];
    return Number(await this.#r.eval(DELETE, keys, [id, this.#member(tenant, id)])) === 1;
  }

  async update(tenant: string, id: string, from: readonly ResponseStatus[], p: ResponsePatch): Promise<StoredResponse | undefined> {
    for (let i = 0; i < MAX_CAS_TRIES; i++) {
      const got = await this.#read(tenant, id);
      if (got === undefined || !from.includes(got.record.status)) return undefined;
      const next: StoredResponse = { ...got.record, status: p.status };
      if (p.response !== undefined) next.response = p.response;
      if (p.input !== undefined) next.input = p.input;
      if (p.context !== undefined) next.context = (await this.#wholeConversation({ ...next, context: p.context, ...(p.previousId === undefined ? {} : { previousId: p.previousId }) })).context;
      if (p.request === null) delete next.request;
      if (p.owner === null) delete next.owner;
      else if (p.owner !== undefined) next.owner = p.owner;
      if (p.leaseUntilMs === null) delete next.leaseUntilMs;
      else if (p.leaseUntilMs !== undefined) next.leaseUntilMs = p.leaseUntilMs;
      const toRun = next.request !== undefined && (next.status === "queued" || next.status === "in_progress") ? 1 : 0;
      const keys = [this.#record(tenant, id), this.#tenant(tenant, "sizes"), this.#tenant(tenant, "total"), this.#background];
      const args = [got.v, bodyOf(next), next.status, recordBytes(next), id, next.owner ?? "", next.leaseUntilMs ?? "", this.#member(tenant, id), toRun];
      if (Number(await this.#r.eval(UPDATE, keys, args)) === 1) return next;
    }
    throw new Error(`responses store: the record ${id} kept changing under a compare-and-set`);
  }

  async claim(owner: string, nowMs: number, leaseUntilMs: number, max: number): Promise<StoredResponse[]> {
    if (max <= 0) return [];
    const out = (await this.#r.eval(CLAIM, [this.#background], [nowMs, leaseUntilMs, owner, max, `${this.#p}r:`])) as string[] | null;
    const claimed: StoredResponse[] = [];
    for (let i = 0; out && i + 1 < out.length; i += 2) {
      const record: StoredResponse = { ...(JSON.parse(out[i + 1]!) as Body), status: "queued", owner, leaseUntilMs };
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
