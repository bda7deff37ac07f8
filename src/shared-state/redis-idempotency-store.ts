/**
 * Idempotency records on Redis, shared by every gateway: a retry that lands
 * on another gateway replays the same answer. One hash per (tenant, key):
 * fingerprint, state (running | done), the holder's token, `until` (the
 * lock's end while running, the record's expiry once done) and the recorded
 * answer. Each step is one script, so two gateways never both take a key.
 * Redis expires records itself (an hour after `until`), so nothing is purged.
 */
import type { IdempotencyBegin, IdempotencyStore } from "../jobs/idempotency-store.ts";
import type { RecordedResponse } from "../shared/recorded-response.ts";
import { type RedisConnection, RedisScript } from "./redis-connection.ts";
import { expiryTtlMs } from "./redis-ttl.ts";

/** KEYS: record. ARGV: fingerprint, now, lock end, token, ttl ms. */
const BEGIN = new RedisScript(
  "idempotency-begin",
  `local h = redis.call('HMGET', KEYS[1], 'fp', 'state', 'until', 'status', 'headers', 'body')
if h[1] and tonumber(h[3]) > tonumber(ARGV[2]) then
  if h[2] == 'running' then return {'running', h[1]} end
  return {'completed', h[1], h[4], h[5], h[6]}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'fp', ARGV[1], 'state', 'running', 'token', ARGV[4], 'until', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {'started', ARGV[4]}`,
);

/** KEYS: record. ARGV: token, expiry, status, headers JSON, body (base64), ttl ms. */
const COMPLETE = new RedisScript(
  "idempotency-complete",
  `if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] or redis.call('HGET', KEYS[1], 'state') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'state', 'done', 'until', ARGV[2], 'status', ARGV[3], 'headers', ARGV[4], 'body', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return 1`,
);

/** KEYS: record. ARGV: token. */
const ABANDON = new RedisScript(
  "idempotency-abandon",
  `if redis.call('HGET', KEYS[1], 'token') == ARGV[1] and redis.call('HGET', KEYS[1], 'state') == 'running' then return redis.call('DEL', KEYS[1]) end
return 0`,
);

export class RedisIdempotencyStore implements IdempotencyStore {
  readonly #r: RedisConnection;
  readonly #p: string;

  constructor(redis: RedisConnection, prefix: string) {
    this.#r = redis;
    this.#p = `${prefix}idem:`;
  }

  /** Length-prefixed, so no tenant and key pair can spell another's. */
  #key(scope: string, key: string): string {
    return `${this.#p}${scope.length}:${scope}:${key}`;
  }

  async begin(scope: string, key: string, fingerprint: string, nowMs: number, lockUntilMs: number): Promise<IdempotencyBegin> {
    const token = crypto.randomUUID();
    const r = (await this.#r.eval(BEGIN, [this.#key(scope, key)], [fingerprint, nowMs, lockUntilMs, token, expiryTtlMs(lockUntilMs - nowMs)])) as (
      | string
      | null
    )[];
    if (r[0] === "started") return { kind: "started", token };
    if (r[0] === "running") return { kind: "running", fingerprint: r[1]! };
    return {
      kind: "completed",
      fingerprint: r[1]!,
      response: {
        status: Number(r[2] ?? 200),
        headers: JSON.parse(r[3] ?? "[]") as [string, string][],
        body: new Uint8Array(Buffer.from(r[4] ?? "", "base64")),
      },
    };
  }

  async complete(scope: string, key: string, token: string, res: RecordedResponse, expiresAtMs: number): Promise<boolean> {
    const body = Buffer.from(res.body.buffer, res.body.byteOffset, res.body.byteLength).toString("base64");
    const args = [token, expiresAtMs, res.status, JSON.stringify(res.headers), body, expiryTtlMs(expiresAtMs - Date.now())];
    return Number(await this.#r.eval(COMPLETE, [this.#key(scope, key)], args)) === 1;
  }

  async abandon(scope: string, key: string, token: string): Promise<void> {
    await this.#r.eval(ABANDON, [this.#key(scope, key)], [token]);
  }

  /** Shared store: a key held by a gateway that died is free once its lock lapses (the request's total deadline). */
  async releaseAllRunning(): Promise<number> {
    return 0;
  }

  /** Redis expires records itself. */
  async purgeExpired(): Promise<number> {
    return 0;
  }
}
