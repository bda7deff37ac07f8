/**
 * The atomic steps of the Redis responses store, as Lua scripts. Key layout
 * under the store's prefix P, for tenant member prefix M ("len:tenant:") and id:
 *
 *   P r:M id   hash: json (the record's body), status, v (compare-and-set version), owner, lease,
 *              exp (expiry ms), ib (input bytes); a record of the earlier layout has only
 *              json, status, v, owner, lease, and its input inside json
 *   P i:M id   list of the record's input items (JSON each), in order: a page is one LRANGE
 *   P x:M id   hash item id -> index in that list ("first:last" when an id repeats): the `after` cursor
 *   P t:ids|sizes|total:len:tenant   the tenant's ids by expiry, their sizes, the running total
 *   P background                     zset of the background responses to run, by lease end
 *
 * The item keys expire with their record and are written and dropped in the
 * same script as it.
 */
import { RedisScript } from "./redis-connection.ts";

/** Lua: drop one of the tenant's records with its item keys and index entries; returns the tenant's new total. Needs P (key prefix), M (tenant member prefix) and KEYS[2..5] as PUT and DELETE pass them. */
const DROP = `local function drop(P, M, victim)
  local size = tonumber(redis.call('HGET', KEYS[3], victim) or '0')
  redis.call('DEL', P .. 'r:' .. M .. victim, P .. 'i:' .. M .. victim, P .. 'x:' .. M .. victim)
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
  if n > 0 then redis.call('PEXPIRE', KEYS[6], ttl) end
  if k > 0 then redis.call('PEXPIRE', KEYS[7], ttl) end
end
`;

/** KEYS: record, tenant ids, tenant sizes, tenant total, background set, items, item index. ARGV: json, status, bytes, expires, ttl ms, budget, id, P, M, background (0|1), now, input bytes, then the items (WRITE_ITEMS). */
export const PUT = new RedisScript(
  "responses-put",
  `${DROP}${WRITE_ITEMS}
for _, victim in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[11])) do
  if victim ~= ARGV[7] then drop(ARGV[8], ARGV[9], victim) end
end
local old = redis.call('HGET', KEYS[3], ARGV[7])
if old then redis.call('DECRBY', KEYS[4], old) end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'json', ARGV[1], 'status', ARGV[2], 'v', '1', 'exp', ARGV[4], 'ib', ARGV[12])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
writeItems(13, ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[7])
redis.call('HSET', KEYS[3], ARGV[7], ARGV[3])
local total = redis.call('INCRBY', KEYS[4], ARGV[3])
while total > tonumber(ARGV[6]) do
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 1)
  local victim = oldest[1]
  if victim == ARGV[7] then victim = oldest[2] end
  if not victim then break end
  total = drop(ARGV[8], ARGV[9], victim)
end
if ARGV[10] == '1' then redis.call('ZADD', KEYS[5], 0, ARGV[9] .. ARGV[7]) else redis.call('ZREM', KEYS[5], ARGV[9] .. ARGV[7]) end
return 1`,
);

/** KEYS: record, tenant ids, tenant sizes, tenant total, background set. ARGV: id, P, M. */
export const DELETE = new RedisScript(
  "responses-delete",
  `${DROP}
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
drop(ARGV[2], ARGV[3], ARGV[1])
return 1`,
);

/** KEYS: record, tenant sizes, tenant total, background set, (unused), items, item index. ARGV: version read, json, status, bytes, id, owner ('' clears), lease ('' clears), background member, still to run (0|1), expires, input bytes, items given (0|1), then the items (WRITE_ITEMS). */
export const UPDATE = new RedisScript(
  "responses-update",
  `${WRITE_ITEMS}
if redis.call('HGET', KEYS[1], 'v') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'json', ARGV[2], 'status', ARGV[3], 'exp', ARGV[10], 'ib', ARGV[11])
redis.call('HINCRBY', KEYS[1], 'v', 1)
if ARGV[6] == '' then redis.call('HDEL', KEYS[1], 'owner') else redis.call('HSET', KEYS[1], 'owner', ARGV[6]) end
if ARGV[7] == '' then redis.call('HDEL', KEYS[1], 'lease') else redis.call('HSET', KEYS[1], 'lease', ARGV[7]) end
if ARGV[12] == '1' then writeItems(13, math.max(1, redis.call('PTTL', KEYS[1]))) end
local old = tonumber(redis.call('HGET', KEYS[2], ARGV[5]) or '0')
redis.call('HSET', KEYS[2], ARGV[5], ARGV[4])
redis.call('INCRBY', KEYS[3], tonumber(ARGV[4]) - old)
if ARGV[9] == '0' then redis.call('ZREM', KEYS[4], ARGV[8]) end
return 1`,
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
