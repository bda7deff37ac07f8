/**
 * The atomic steps of the Redis responses store, as Lua scripts. Key layout
 * under the store's prefix P, for tenant member prefix M ("len:tenant:") and id:
 *
 *   P r:M id   hash: json (the record's body), status, v (compare-and-set version), owner, lease,
 *              exp (expiry ms), ib (input bytes), ctx (the items sent after prev's conversation,
 *              JSON array), out (its response's output items, JSON array), prev (the record it
 *              follows, absent for a whole conversation); a record of the earlier layout has only
 *              json, status, v, owner, lease, with its input and whole conversation inside json
 *   P f:M id   set of the ids whose prev is id
 *   P i:M id   list of the record's input items (JSON each), in order: a page is one LRANGE
 *   P x:M id   hash item id -> index in that list ("first:last" when an id repeats): the `after` cursor
 *   P t:ids|sizes|total:len:tenant   the tenant's ids by expiry, their sizes, the running total
 *   P background                     zset of the background responses to run, by lease end
 *
 * The item keys expire with their record and are written and dropped in the
 * same script as it.
 *
 * A chat stores each turn once: a follow-up's record keeps its own turn and
 * names the one it follows. Redis expires each key on its own clock, so
 * storing a follow-up extends every record of its chain (and their follower
 * sets) to live at least as long as it; llmgw's own removals (delete, budget
 * eviction, dropping expired ids) first copy the removed record's whole
 * conversation into its followers. A chain is at most L records: past that
 * a follow-up stores its whole conversation and starts a new one, so every
 * walk is bounded. Conversations are JSON arrays joined as strings
 * (JSON.stringify's compact form), never decoded in Lua.
 */
import { RedisScript } from "./redis-connection.ts";

/** Lua: the chain helpers and drop; the script sets P (key prefix), M (tenant member prefix), L (chain bound) first, and passes KEYS[2..5] as tenant ids, sizes, total, background set. */
const CHAIN = `local P, M, L
local function rk(id) return P .. 'r:' .. M .. id end
local function fk(id) return P .. 'f:' .. M .. id end
local function inner(a)
  if not a or a == '[]' then return nil end
  return string.sub(a, 2, -2)
end
local function cat(a, b)
  local x, y = inner(a), inner(b)
  if not x then return b end
  if not y then return a end
  return '[' .. x .. ',' .. y .. ']'
end
local function chainOf(id)
  local parts = {}
  local at, hops = id, 0
  while at and hops <= 2 * L do
    local f = redis.call('HMGET', rk(at), 'ctx', 'out', 'prev')
    if not f[1] then break end
    local o = inner(f[2])
    if o then table.insert(parts, 1, o) end
    local c = inner(f[1])
    if c then table.insert(parts, 1, c) end
    at = f[3]
    hops = hops + 1
  end
  return '[' .. table.concat(parts, ',') .. ']'
end
local function extend(key, ttl)
  if not ttl then redis.call('PERSIST', key)
  elseif redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
local function ttlOf(key)
  local ttl = redis.call('PTTL', key)
  if ttl < 1 then return nil end
  return ttl
end
local function earlier(prev)
  if prev == '' then return false end
  local f = redis.call('HMGET', rk(prev), 'ctx', 'json')
  return f[2] ~= false and f[1] == false
end
local function link(id, prev, ctx, ttl)
  if prev == '' or redis.call('EXISTS', rk(prev)) == 0 then return ctx, '' end
  local at, n = prev, 0
  while at and n <= L do
    n = n + 1
    extend(rk(at), ttl)
    extend(fk(at), ttl)
    at = redis.call('HGET', rk(at), 'prev')
  end
  if n >= L then return cat(chainOf(prev), ctx), '' end
  redis.call('SADD', fk(prev), id)
  extend(fk(prev), ttl)
  return ctx, prev
end
local function unlink(id)
  local prev = redis.call('HGET', rk(id), 'prev')
  if prev then redis.call('SREM', fk(prev), id) end
end
local function detach(victim)
  local followers = redis.call('SMEMBERS', fk(victim))
  redis.call('DEL', fk(victim))
  local before
  for _, fid in ipairs(followers) do
    local f = redis.call('HMGET', rk(fid), 'ctx', 'prev')
    if f[1] and f[2] == victim then
      before = before or chainOf(victim)
      local ctx = cat(before, f[1])
      redis.call('HSET', rk(fid), 'ctx', ctx)
      redis.call('HDEL', rk(fid), 'prev')
      if redis.call('HEXISTS', KEYS[3], fid) == 1 then
        redis.call('HINCRBY', KEYS[3], fid, #ctx - #f[1])
        redis.call('INCRBY', KEYS[4], #ctx - #f[1])
      end
    end
  end
end
local function drop(victim)
  unlink(victim)
  detach(victim)
  local size = tonumber(redis.call('HGET', KEYS[3], victim) or '0')
  redis.call('DEL', rk(victim), P .. 'i:' .. M .. victim, P .. 'x:' .. M .. victim)
  redis.call('ZREM', KEYS[2], victim)
  redis.call('HDEL', KEYS[3], victim)
  redis.call('ZREM', KEYS[5], M .. victim)
  return redis.call('DECRBY', KEYS[4], size)
end
`;

/** Lua: replace the input items of KEYS[6] (list) and KEYS[7] (index) from ARGV[at]: count n, n items, count k, k (id, index) pairs; expire them in ttl ms. */
const WRITE_ITEMS = `local function writeItems(at, ttl)
  redis.call('DEL', KEYS[6], KEYS[7])
  local n = tonumber(ARGV[at])
  for i = at + 1, at + n, 1000 do redis.call('RPUSH', KEYS[6], unpack(ARGV, i, math.min(i + 999, at + n))) end
  local k = tonumber(ARGV[at + n + 1])
  local from = at + n + 2
  for i = from, from + 2 * k - 1, 1000 do redis.call('HSET', KEYS[7], unpack(ARGV, i, math.min(i + 999, from + 2 * k - 1))) end
  if ttl and n > 0 then redis.call('PEXPIRE', KEYS[6], ttl) end
  if ttl and k > 0 then redis.call('PEXPIRE', KEYS[7], ttl) end
end
`;

/**
 * KEYS: record, tenant ids, tenant sizes, tenant total, background set, items, item index.
 * ARGV: json, status, bytes (all but ctx), expires, ttl ms, budget, id, P, M, background (0|1), now,
 * input bytes, ctx, out, prev ('' none), L, then the items (WRITE_ITEMS).
 * Returns 1, or 2 when prev is a record of the earlier layout (nothing written: the caller sends the whole conversation).
 */
export const PUT = new RedisScript(
  "responses-put",
  `${CHAIN}${WRITE_ITEMS}
P, M, L = ARGV[8], ARGV[9], tonumber(ARGV[16])
local id = ARGV[7]
if earlier(ARGV[15]) then return 2 end
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[11])
for i = #expired, 1, -1 do
  if expired[i] ~= id then drop(expired[i]) end
end
local old = redis.call('HGET', KEYS[3], id)
if old then redis.call('DECRBY', KEYS[4], old) end
unlink(id)
local ctx, prev = link(id, ARGV[15], ARGV[13], tonumber(ARGV[5]))
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'json', ARGV[1], 'status', ARGV[2], 'v', '1', 'exp', ARGV[4], 'ib', ARGV[12], 'ctx', ctx, 'out', ARGV[14])
if prev ~= '' then redis.call('HSET', KEYS[1], 'prev', prev) end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
extend(fk(id), tonumber(ARGV[5]))
writeItems(17, ARGV[5])
local bytes = tonumber(ARGV[3]) + #ctx
redis.call('ZADD', KEYS[2], ARGV[4], id)
redis.call('HSET', KEYS[3], id, bytes)
local total = redis.call('INCRBY', KEYS[4], bytes)
while total > tonumber(ARGV[6]) do
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 1)
  local victim = oldest[1]
  if victim == id then victim = oldest[2] end
  if not victim then break end
  total = drop(victim)
end
if ARGV[10] == '1' then redis.call('ZADD', KEYS[5], 0, M .. id) else redis.call('ZREM', KEYS[5], M .. id) end
return 1`,
);

/** KEYS: record, tenant ids, tenant sizes, tenant total, background set. ARGV: id, P, M, L. */
export const DELETE = new RedisScript(
  "responses-delete",
  `${CHAIN}
P, M, L = ARGV[2], ARGV[3], tonumber(ARGV[4])
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
drop(ARGV[1])
return 1`,
);

/**
 * KEYS: record, tenant ids, tenant sizes, tenant total, background set, items, item index.
 * ARGV: version read, json, status, bytes (all but ctx), id, owner ('' clears), lease ('' clears), background member,
 * still to run (0|1), expires, input bytes, P, M, L, ctx given (0|1), ctx, out, prev ('' none), items given (0|1), then the items.
 * Returns 1, 0 when the version changed, 2 as PUT does.
 */
export const UPDATE = new RedisScript(
  "responses-update",
  `${CHAIN}${WRITE_ITEMS}
if redis.call('HGET', KEYS[1], 'v') ~= ARGV[1] then return 0 end
P, M, L = ARGV[12], ARGV[13], tonumber(ARGV[14])
local id = ARGV[5]
if ARGV[15] == '1' and earlier(ARGV[18]) then return 2 end
local ctx = redis.call('HGET', KEYS[1], 'ctx') or '[]'
if ARGV[15] == '1' then
  unlink(id)
  local prev
  ctx, prev = link(id, ARGV[18], ARGV[16], ttlOf(KEYS[1]))
  if prev ~= '' then redis.call('HSET', KEYS[1], 'prev', prev) else redis.call('HDEL', KEYS[1], 'prev') end
end
redis.call('HSET', KEYS[1], 'json', ARGV[2], 'status', ARGV[3], 'exp', ARGV[10], 'ib', ARGV[11], 'ctx', ctx, 'out', ARGV[17])
redis.call('HINCRBY', KEYS[1], 'v', 1)
if ARGV[6] == '' then redis.call('HDEL', KEYS[1], 'owner') else redis.call('HSET', KEYS[1], 'owner', ARGV[6]) end
if ARGV[7] == '' then redis.call('HDEL', KEYS[1], 'lease') else redis.call('HSET', KEYS[1], 'lease', ARGV[7]) end
if ARGV[19] == '1' then writeItems(20, ttlOf(KEYS[1])) end
local bytes = tonumber(ARGV[4]) + #ctx
local old = tonumber(redis.call('HGET', KEYS[3], id) or '0')
redis.call('HSET', KEYS[3], id, bytes)
redis.call('INCRBY', KEYS[4], bytes - old)
if ARGV[9] == '0' then redis.call('ZREM', KEYS[5], ARGV[8]) end
return 1`,
);

/**
 * KEYS: record. ARGV: now, id, P, M, L. Returns {0} no such response (or a link of its chain is gone),
 * {1} a record of the earlier layout (its whole conversation is in its json), or {3, status, ctx, out, …}
 * for the record and each one it follows, newest first.
 */
export const CONVERSATION = new RedisScript(
  "responses-conversation",
  `${CHAIN}
P, M, L = ARGV[3], ARGV[4], tonumber(ARGV[5])
local f = redis.call('HMGET', KEYS[1], 'exp', 'status', 'ctx')
if not f[1] or not f[3] then
  if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
  return {1}
end
if tonumber(f[1]) <= tonumber(ARGV[1]) then return {0} end
local out = {3, f[2]}
local at, n = ARGV[2], 0
while at do
  n = n + 1
  if n > 2 * L + 2 then return {0} end
  local g = redis.call('HMGET', rk(at), 'ctx', 'out', 'prev')
  if not g[1] then return {0} end
  table.insert(out, g[1])
  table.insert(out, g[2] or '[]')
  at = g[3]
end
return out`,
);

/**
 * KEYS: record, items, item index. ARGV: now, after ('' none), limit, asc (1|0).
 * Returns {0} no such response, {1} a record of the earlier layout (its items are in its json),
 * {2} no item `after`, or {3, items}: up to limit + 1 items in list order (desc: the caller reverses them).
 */
export const INPUT_ITEMS = new RedisScript(
  "responses-input-items",
  `local exp = redis.call('HGET', KEYS[1], 'exp')
if not exp then
  if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
  return {1}
end
if tonumber(exp) <= tonumber(ARGV[1]) then return {0} end
local asc = ARGV[4] == '1'
local limit = tonumber(ARGV[3])
local from
if ARGV[2] ~= '' then
  local at = redis.call('HGET', KEYS[3], ARGV[2])
  if not at then return {2} end
  local first, last = string.match(at, '^(%d+):(%d+)$')
  if not first then first = at last = at end
  if asc then from = tonumber(first) + 1 else from = tonumber(last) - 1 end
elseif asc then from = 0
else from = redis.call('LLEN', KEYS[2]) - 1 end
if asc then return {3, redis.call('LRANGE', KEYS[2], from, from + limit)} end
if from < 0 then return {3, {}} end
return {3, redis.call('LRANGE', KEYS[2], math.max(0, from - limit), from)}`,
);

/** KEYS: background set. ARGV: now, lease end, owner, max, record key prefix. Returns [member, json, owner, lease…]. */
export const CLAIM = new RedisScript(
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
export const RENEW = new RedisScript(
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
