/**
 * The reconciler lease: one Redis key, `<prefix>leader`, holding
 * "<token> <gateway>" with a TTL of lease_ms. A gateway takes it when it is
 * free — with a new fencing token: `<prefix>leader:epoch` incremented, and
 * raised to Redis's clock in milliseconds when behind it, so a term's token is
 * higher than every earlier one even after Redis lost its data (agents
 * remember the highest token they saw) — and renews it every third of the
 * lease. It counts itself the leader only until its last successful renewal
 * *sent* + lease_ms (the key cannot outlive that), so a leader cut off from
 * Redis steps down no later than the moment another may take over. Followers
 * try again when the holder's TTL runs out, so a dead leader is replaced
 * within one lease period.
 */
import { logger } from "../shared/logger.ts";
import { type RedisConnection, RedisScript } from "./redis-connection.ts";

/** KEYS: lease, epoch. ARGV: me, lease ms. → {1, token} held by me; {0, token, pttl, holder} held by another. */
const ACQUIRE = new RedisScript(
  "lease-acquire",
  `local cur = redis.call('GET', KEYS[1])
if cur then
  local sep = string.find(cur, ' ', 1, true)
  local token = string.sub(cur, 1, sep - 1)
  local holder = string.sub(cur, sep + 1)
  if holder == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, token}
  end
  return {0, token, redis.call('PTTL', KEYS[1]), holder}
end
local token = redis.call('INCR', KEYS[2])
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if token < ms then
  token = ms
  redis.call('SET', KEYS[2], token)
end
redis.call('SET', KEYS[1], token .. ' ' .. ARGV[1], 'PX', ARGV[2])
return {1, tostring(token)}`,
);

/** KEYS: lease. ARGV: "<token> <me>". Gives the lease up only if it is still ours. */
const RELEASE = new RedisScript(
  "lease-release",
  `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`,
);

interface LeaseStatus {
  leader: boolean;
  /** This gateway's fencing token while it leads. */
  token: number | undefined;
  /** Who holds the lease, as last seen (undefined: nobody, or not known). */
  holder: string | undefined;
  /** The holder's token, as last seen. */
  holderToken: number | undefined;
}

interface LeaderLeaseOptions {
  /** This gateway's name. */
  me: string;
  leaseMs: number;
  /** Key prefix (state.key_prefix). */
  prefix: string;
  now?: () => number;
  /** Told when this gateway becomes the leader (with its token) or stops being it. */
  onChange?: (leader: boolean, token: number | undefined) => void;
}

/** Retry while Redis cannot be reached (the lease may still be ours until it lapses). */
const RETRY_WHEN_DOWN_MS = 250;
/** A follower tries again this soon after the holder's TTL should have run out. */
const TAKEOVER_SLACK_MS = 5;

export class LeaderLease {
  readonly #r: RedisConnection;
  readonly #o: LeaderLeaseOptions;
  readonly #now: () => number;
  readonly #key: string;
  #token: number | undefined;
  #validUntil = 0;
  #holder: string | undefined;
  #holderToken: number | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #expiry: ReturnType<typeof setTimeout> | undefined;
  #running = false;
  /** Terms this gateway has begun (each a new token). */
  terms = 0;

  constructor(redis: RedisConnection, opts: LeaderLeaseOptions) {
    this.#r = redis;
    this.#o = opts;
    this.#now = opts.now ?? Date.now;
    this.#key = `${opts.prefix}leader`;
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    void this.tick();
  }

  /** Stop renewing and hand the lease over at once if it is ours (a clean shutdown needs no wait). */
  async stop(): Promise<void> {
    this.#running = false;
    clearTimeout(this.#timer);
    const token = this.#token;
    this.#lose("stopping");
    if (token === undefined) return;
    await this.#r.eval(RELEASE, [this.#key], [`${token} ${this.#o.me}`]).catch(() => undefined);
  }

  isLeader(): boolean {
    return this.#token !== undefined && this.#now() < this.#validUntil;
  }

  /** The fencing token while this gateway leads. */
  fencingToken(): number | undefined {
    return this.isLeader() ? this.#token : undefined;
  }

  status(): LeaseStatus {
    const leader = this.isLeader();
    return { leader, token: leader ? this.#token : undefined, holder: this.#holder, holderToken: this.#holderToken };
  }

  /** An agent refused our token: someone newer leads. Step down now; the next attempt tells us who. */
  fenced(): void {
    this.#lose("an agent refused this gateway's fencing token");
  }

  /** One attempt to take or renew the lease; schedules the next. */
  async tick(): Promise<void> {
    if (!this.#running) return;
    const sentAt = this.#now();
    let next = this.#o.leaseMs / 3;
    try {
      const r = (await this.#r.eval(ACQUIRE, [this.#key, `${this.#key}:epoch`], [this.#o.me, this.#o.leaseMs])) as (string | number)[];
      const token = Number(r[1]);
      if (Number(r[0]) === 1) {
        // The key's TTL started no earlier than sentAt: our term cannot outlast sentAt + lease.
        this.#validUntil = sentAt + this.#o.leaseMs;
        this.#holder = this.#o.me;
        this.#holderToken = token;
        if (this.#token !== token) {
          this.#token = token;
          this.terms++;
          logger().info({ gateway: this.#o.me, token }, "reconciler lease taken");
          this.#o.onChange?.(true, token);
        }
        this.#armExpiry();
      } else {
        this.#holder = String(r[3]);
        this.#holderToken = token;
        if (this.#token !== undefined) this.#lose(`held by ${this.#holder}`);
        next = Math.min(next, Math.max(0, Number(r[2])) + TAKEOVER_SLACK_MS);
      }
    } catch {
      // Redis away: keep leading until the lease would lapse (the expiry timer steps down), and try again soon.
      next = Math.min(next, RETRY_WHEN_DOWN_MS);
    }
    if (this.#running) this.#timer = setTimeout(() => void this.tick(), next);
  }

  #armExpiry(): void {
    clearTimeout(this.#expiry);
    this.#expiry = setTimeout(
      () => {
        if (this.#token !== undefined && this.#now() >= this.#validUntil) this.#lose("not renewed in time");
      },
      Math.max(0, this.#validUntil - this.#now()) + 1,
    );
  }

  #lose(why: string): void {
    clearTimeout(this.#expiry);
    if (this.#token === undefined) return;
    logger().warn({ gateway: this.#o.me, token: this.#token, why }, "reconciler lease lost");
    this.#token = undefined;
    this.#validUntil = 0;
    this.#o.onChange?.(false, undefined);
  }
}
