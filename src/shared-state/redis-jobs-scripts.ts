/**
 * The atomic steps of the Redis jobs store, as Lua scripts (each runs alone
 * in Redis: no other command sees it half done). Key layout under the
 * prefix P, for a batch B:
 *
 *   P:seq                 insertion counter (files and batches share it)
 *   P:file:ID             hash: tenant, seq, purpose, meta (StoredFile JSON), blob, chunks, bytes
 *   P:blob:BLOB:N         the file's bytes, in chunks of 1 MiB (N from 0); written with an
 *                         expiry that the file's creation lifts (an upload that died leaves nothing)
 *   P:files:TENANT        zset of file ids by seq
 *   P:usage:TENANT        hash: bytes, files (the tenant's quota)
 *   P:batch:B             hash: tenant, status, seq, ver, doc (BatchDoc JSON), total, completed, failed, pt, ct
 *   P:batches:TENANT      zset of batch ids by seq;  P:batches:active  the same for active ones
 *   P:batch:B:lines       hash line → {"c","u","b"} (custom_id, url, body), deleted once the line has a result
 *   P:batch:B:cids        hash line → custom_id (the output files)
 *   P:batch:B:pending     zset line → not-before ms (the work queue)
 *   P:batch:B:running     zset line → lease end ms (the visibility timeout)
 *   P:batch:B:owner       hash line → runner;  P:batch:B:attempts  hash line → failed attempts
 *   P:batch:B:results     hash line → LineResult JSON (HSETNX: written once)
 *   P:owner:RUNNER        set of "B\nline" a runner holds (lease renewal)
 */
import { RedisScript } from "./redis-connection.ts";

/**
 * KEYS: file hash, tenant index, seq, usage. ARGV: tenant, purpose, meta JSON,
 * id, blob, chunks, bytes. Keeps the seq of an id written again; returns the
 * blob and chunk count it replaced ('' and 0 for a new file).
 */
export const PUT_FILE = new RedisScript(
  "put-file",
  `local old = redis.call('HMGET', KEYS[1], 'seq', 'bytes', 'blob', 'chunks')
local seq = old[1]
if not seq then
  seq = redis.call('INCR', KEYS[3])
  redis.call('HINCRBY', KEYS[4], 'files', 1)
end
redis.call('HINCRBY', KEYS[4], 'bytes', tonumber(ARGV[7]) - tonumber(old[2] or '0'))
redis.call('HSET', KEYS[1], 'tenant', ARGV[1], 'seq', seq, 'purpose', ARGV[2], 'meta', ARGV[3], 'blob', ARGV[5], 'chunks', ARGV[6], 'bytes', ARGV[7])
redis.call('ZADD', KEYS[2], seq, ARGV[4])
return {old[3] or '', old[4] or '0'}`,
);

/** KEYS: file hash, tenant index, usage. ARGV: tenant, id. {1, blob, chunks} when deleted, {0} otherwise. */
export const DELETE_FILE = new RedisScript(
  "delete-file",
  `local h = redis.call('HMGET', KEYS[1], 'tenant', 'bytes', 'blob', 'chunks')
if h[1] ~= ARGV[1] then return {0} end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('HINCRBY', KEYS[3], 'files', -1)
redis.call('HINCRBY', KEYS[3], 'bytes', -tonumber(h[2] or '0'))
return {1, h[3] or '', h[4] or '0'}`,
);

/**
 * A page of an index by seq. KEYS: index zset. ARGV: after id or "", count
 * wanted, "asc"|"desc", record key prefix, filter field or "", filter value.
 * Returns ids, or -1 when the cursor id is not in the index.
 */
export const LIST_PAGE = new RedisScript(
  "list-page",
  `local from
if ARGV[1] ~= '' then
  local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
  if not s then return -1 end
  from = '(' .. s
end
local want = tonumber(ARGV[2])
local asc = ARGV[3] == 'asc'
local out = {}
local offset = 0
while #out < want do
  local ids
  if asc then ids = redis.call('ZRANGEBYSCORE', KEYS[1], from or '-inf', '+inf', 'LIMIT', offset, 100)
  else ids = redis.call('ZREVRANGEBYSCORE', KEYS[1], from or '+inf', '-inf', 'LIMIT', offset, 100) end
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    if ARGV[5] == '' or redis.call('HGET', ARGV[4] .. id, ARGV[5]) == ARGV[6] then
      out[#out + 1] = id
      if #out >= want then break end
    end
  end
  offset = offset + #ids
end
return out`,
);

/**
 * One chunk of a batch's lines, before the batch exists (nothing names them
 * yet). KEYS: lines, pending, cids. ARGV: line number, line JSON, custom_id triples.
 */
export const ADD_LINES = new RedisScript(
  "add-lines",
  `for i = 1, #ARGV, 3 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[2], 0, ARGV[i])
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 2])
end
return #ARGV / 3`,
);

/**
 * The batch itself, once its lines are in: from here on it is visible.
 * KEYS: batch hash, tenant index, active index, seq.
 * ARGV: id, tenant, status, doc JSON, total, active (1|0).
 */
export const CREATE_BATCH = new RedisScript(
  "create-batch",
  `local seq = redis.call('INCR', KEYS[4])
redis.call('HSET', KEYS[1], 'tenant', ARGV[2], 'status', ARGV[3], 'seq', seq, 'ver', 0, 'doc', ARGV[4], 'total', ARGV[5], 'completed', 0, 'failed', 0, 'pt', 0, 'ct', 0)
redis.call('ZADD', KEYS[2], seq, ARGV[1])
if ARGV[6] == '1' then redis.call('ZADD', KEYS[3], seq, ARGV[1]) end
return seq`,
);

/**
 * Compare-and-set of the batch document on its version. KEYS: batch hash,
 * active index. ARGV: expected version, new status, new doc JSON, active (1|0), id.
 * Returns 1 when written, 0 when the version moved (read again), -1 when absent.
 */
export const UPDATE_BATCH = new RedisScript(
  "update-batch",
  `local ver = redis.call('HGET', KEYS[1], 'ver')
if not ver then return -1 end
if ver ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'ver', tonumber(ver) + 1, 'status', ARGV[2], 'doc', ARGV[3])
if ARGV[4] == '1' then redis.call('ZADD', KEYS[2], redis.call('HGET', KEYS[1], 'seq'), ARGV[5])
else redis.call('ZREM', KEYS[2], ARGV[5]) end
return 1`,
);

/**
 * Claim up to max lines: due pending ones and running ones whose lease ended
 * before now, lowest line numbers first. KEYS: pending, running, owner,
 * attempts, lines, owner set. ARGV: max, owner, now, lease end, batch id.
 * Returns flat triples: line, line JSON, attempts.
 */
export const CLAIM_LINES = new RedisScript(
  "claim-lines",
  `local max = tonumber(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[3], 'LIMIT', 0, max)
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[3], 'LIMIT', 0, max)
local all = {}
for _, l in ipairs(due) do all[#all + 1] = tonumber(l) end
for _, l in ipairs(lapsed) do all[#all + 1] = tonumber(l) end
table.sort(all)
local out = {}
for i = 1, math.min(max, #all) do
  local l = tostring(all[i])
  redis.call('ZREM', KEYS[1], l)
  redis.call('ZADD', KEYS[2], ARGV[4], l)
  redis.call('HSET', KEYS[3], l, ARGV[2])
  redis.call('SADD', KEYS[6], ARGV[5] .. '\\n' .. l)
  out[#out + 1] = l
  out[#out + 1] = redis.call('HGET', KEYS[5], l) or ''
  out[#out + 1] = redis.call('HGET', KEYS[4], l) or '0'
end
return out`,
);

/** KEYS: owner set. ARGV: owner, lease end, key prefix. Extends every lease the owner still holds; forgets the others. */
export const RENEW_LEASES = new RedisScript(
  "renew-leases",
  `local n = 0
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local cut = string.find(m, '\\n', 1, true)
  local b = ARGV[3] .. 'batch:' .. string.sub(m, 1, cut - 1)
  local l = string.sub(m, cut + 1)
  if redis.call('HGET', b .. ':owner', l) == ARGV[1] and redis.call('ZSCORE', b .. ':running', l) then
    redis.call('ZADD', b .. ':running', 'XX', ARGV[2], l)
    n = n + 1
  else
    redis.call('SREM', KEYS[1], m)
  end
end
return n`,
);

/** KEYS: pending, running, owner, attempts, owner set. ARGV: line, owner, not-before, failed (1|0), batch id. */
export const RELEASE_LINE = new RedisScript(
  "release-line",
  `if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] or not redis.call('ZSCORE', KEYS[2], ARGV[1]) then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('SREM', KEYS[5], ARGV[5] .. '\\n' .. ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
if ARGV[4] == '1' then redis.call('HINCRBY', KEYS[4], ARGV[1], 1) end
return 1`,
);

/**
 * Record a result once (HSETNX) and count it in the same step; the line's
 * body is not needed any more. KEYS: results, pending, running, owner, batch
 * hash, lines. ARGV: line, result JSON, ok (1|0), prompt tokens, completion
 * tokens. 1 when this call recorded it.
 */
export const RECORD_RESULT = new RedisScript(
  "record-result",
  `if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('HDEL', KEYS[6], ARGV[1])
if ARGV[3] == '1' then redis.call('HINCRBY', KEYS[5], 'completed', 1) else redis.call('HINCRBY', KEYS[5], 'failed', 1) end
redis.call('HINCRBY', KEYS[5], 'pt', ARGV[4])
redis.call('HINCRBY', KEYS[5], 'ct', ARGV[5])
return 1`,
);
