/**
 * The demand exchange: about once a second each gateway publishes
 * its per-pool demand to `<prefix>demand` and reads everyone's in the same
 * script (entries older than three intervals, by Redis's clock, are dropped:
 * a dead gateway's demand stops counting), computes its admission shares and
 * writes them to the pool share table the scheduler worker scales its limits
 * by. Demand is the peak of held + queued requests per pool, sampled ten
 * times an interval. Redis away: the last shares stay (fail static).
 */
import { logger } from "../shared/logger.ts";
import type { PoolShareTable } from "../shared/pool-shares.ts";
import { computeShares, type GatewayDemand } from "./demand-shares.ts";
import { type RedisConnection, RedisScript } from "./redis-connection.ts";

/** KEYS: demand hash. ARGV: me, demand JSON, stale ms. → flat gateway, JSON pairs of the fresh entries. */
const EXCHANGE = new RedisScript(
  "demand-exchange",
  `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], ARGV[1], now .. ' ' .. ARGV[2])
local out = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local v = all[i + 1]
  local sep = string.find(v, ' ', 1, true)
  if sep and now - tonumber(string.sub(v, 1, sep - 1)) <= tonumber(ARGV[3]) then
    out[#out + 1] = all[i]
    out[#out + 1] = string.sub(v, sep + 1)
  else
    redis.call('HDEL', KEYS[1], all[i])
  end
end
return out`,
);

export interface DemandSource {
  /** The pools of the shared pool table. */
  pools(): readonly { index: number; name: string }[];
  /** Requests of this gateway holding or waiting for the pool now. */
  demand(pool: number): number;
}

interface DemandExchangeOptions {
  prefix: string;
  me: string;
  intervalMs: number;
  source: DemandSource;
  shares: PoolShareTable;
}

const SAMPLES_PER_INTERVAL = 10;

export class DemandExchange {
  readonly #r: RedisConnection;
  readonly #o: DemandExchangeOptions;
  readonly #key: string;
  /** Peak demand per pool index since the last exchange. */
  #peaks = new Map<number, number>();
  #timers: ReturnType<typeof setInterval>[] = [];
  #gateways = 1;
  #shares: Record<string, number> = {};
  #exchangedAt: number | undefined;
  #exchanging = false;

  constructor(redis: RedisConnection, opts: DemandExchangeOptions) {
    this.#r = redis;
    this.#o = opts;
    this.#key = `${opts.prefix}demand`;
  }

  start(): void {
    if (this.#timers.length > 0) return;
    this.#timers = [
      setInterval(() => this.#sample(), Math.max(10, this.#o.intervalMs / SAMPLES_PER_INTERVAL)),
      setInterval(() => void this.exchange(), this.#o.intervalMs),
    ];
    void this.exchange();
  }

  /** Stop, and take this gateway's demand out at once (its share goes to the others at their next exchange). */
  async stop(): Promise<void> {
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    await this.#r.send("HDEL", [this.#key, this.#o.me]).catch(() => undefined);
  }

  #sample(): void {
    for (const { index } of this.#o.source.pools()) {
      const d = this.#o.source.demand(index);
      if (d > (this.#peaks.get(index) ?? 0)) this.#peaks.set(index, d);
    }
  }

  /** Publish, read everyone's, update the shares. False when Redis could not be reached (the last shares stay). */
  async exchange(): Promise<boolean> {
    if (this.#exchanging) return false;
    this.#exchanging = true;
    try {
      this.#sample();
      const pools = this.#o.source.pools();
      const mine: Record<string, number> = {};
      for (const { index, name } of pools) mine[name] = this.#peaks.get(index) ?? 0;
      this.#peaks = new Map();
      const flat = (await this.#r.eval(EXCHANGE, [this.#key], [this.#o.me, JSON.stringify(mine), 3 * this.#o.intervalMs])) as string[];
      const demands: GatewayDemand[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) {
        try {
          demands.push({ gateway: flat[i]!, pools: JSON.parse(flat[i + 1]!) as Record<string, number> });
        } catch {
          logger().warn({ gateway: flat[i] }, "demand exchange: unreadable entry skipped");
        }
      }
      this.#shares = computeShares(
        this.#o.me,
        demands,
        pools.map((p) => p.name),
      );
      for (const { index, name } of pools) this.#o.shares.set(index, this.#shares[name] ?? 1);
      this.#gateways = Math.max(1, demands.length);
      this.#exchangedAt = Date.now();
      return true;
    } catch {
      return false;
    } finally {
      this.#exchanging = false;
    }
  }

  /** Gateways seen at the last exchange (this one included). */
  get gateways(): number {
    return this.#gateways;
  }

  status(): { gateways: number; shares: Record<string, number>; exchangedAt: number | undefined } {
    return { gateways: this.#gateways, shares: { ...this.#shares }, exchangedAt: this.#exchangedAt };
  }
}
