/**
 * The autoscaler's demand across gateways: each follower pushes its window
 * of each autoscaled model to the list `<prefix>autoscale-demand` every
 * interval, stamped with Redis's clock; the leader takes the whole list in
 * one script at each decision and merges it into its own window
 * (control/autoscale/demand.ts). The list is trimmed to MAX_ENTRIES and
 * expires when nobody writes, and each window carries at most
 * MAX_PEER_SAMPLES latencies of each kind, so a leader that stops
 * collecting costs Redis a bounded amount. Redis away: followers' windows
 * are lost and the leader decides on its own (fail static).
 */
import { type DemandWindow, MAX_PEER_SAMPLES, type PeerDemand, type PeerWindow } from "../control/autoscale/demand.ts";
import { logger } from "../shared/logger.ts";
import { type RedisConnection, RedisScript } from "./redis-connection.ts";

/** Windows the list keeps at most (the latest). */
const MAX_ENTRIES = 2_000;
/** The list expires this long after its last write, ms. */
const EXPIRE_MS = 600_000;

/** KEYS: list. ARGV: entry, max entries, expire ms. */
const PUSH = new RedisScript(
  "autoscale-demand-push",
  `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('RPUSH', KEYS[1], now .. ' ' .. ARGV[1])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[2]), -1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`,
);

/** KEYS: list. → {now, entries}: every entry, the list emptied. */
const TAKE = new RedisScript(
  "autoscale-demand-take",
  `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('LRANGE', KEYS[1], 0, -1)
redis.call('DEL', KEYS[1])
return {tostring(now), all}`,
);

/** What one entry holds (the window, its model and gateway). */
interface Entry extends DemandWindow {
  gateway: string;
  model: string;
}

function finiteList(v: unknown): number[] {
  return Array.isArray(v) ? v.filter((x): x is number => typeof x === "number" && Number.isFinite(x) && x >= 0).slice(-MAX_PEER_SAMPLES) : [];
}

function count(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : 0;
}

/** An entry another gateway wrote, checked field by field (another gateway's bug must not break this one); undefined when unreadable. */
function readEntry(text: string, now: number): PeerWindow | undefined {
  const sep = text.indexOf(" ");
  const at = Number(text.slice(0, sep));
  if (sep < 0 || !Number.isFinite(at)) return undefined;
  let e: Partial<Entry>;
  try {
    e = JSON.parse(text.slice(sep + 1)) as Partial<Entry>;
  } catch {
    return undefined;
  }
  if (typeof e.gateway !== "string" || typeof e.model !== "string") return undefined;
  return {
    gateway: e.gateway,
    model: e.model,
    ageMs: Math.max(0, now - at),
    arrivals: count(e.arrivals),
    inflight: count(e.inflight),
    promptTokens: count(e.promptTokens),
    ttftMs: finiteList(e.ttftMs),
    itlMs: finiteList(e.itlMs),
  };
}

export class AutoscaleDemandExchange implements PeerDemand {
  readonly #r: RedisConnection;
  readonly #key: string;
  readonly #me: string;

  constructor(redis: RedisConnection, opts: { prefix: string; me: string }) {
    this.#r = redis;
    this.#key = `${opts.prefix}autoscale-demand`;
    this.#me = opts.me;
  }

  publish(model: string, w: DemandWindow): void {
    const entry: Entry = {
      gateway: this.#me,
      model,
      arrivals: w.arrivals,
      inflight: w.inflight,
      promptTokens: w.promptTokens,
      ttftMs: w.ttftMs.slice(-MAX_PEER_SAMPLES),
      itlMs: w.itlMs.slice(-MAX_PEER_SAMPLES),
    };
    this.#r.eval(PUSH, [this.#key], [JSON.stringify(entry), MAX_ENTRIES, EXPIRE_MS]).catch((err) => {
      logger().debug({ err: err instanceof Error ? err.message : String(err), model }, "autoscale demand: window not published");
    });
  }

  async collect(): Promise<PeerWindow[]> {
    let reply: unknown;
    try {
      reply = await this.#r.eval(TAKE, [this.#key], []);
    } catch (err) {
      logger().warn({ err: err instanceof Error ? err.message : String(err) }, "autoscale demand: followers' windows not read; deciding on this gateway's");
      return [];
    }
    const [nowText, entries] = Array.isArray(reply) ? (reply as [unknown, unknown]) : [undefined, undefined];
    const now = Number(nowText);
    if (!Number.isFinite(now) || !Array.isArray(entries)) return [];
    const out: PeerWindow[] = [];
    for (const text of entries) {
      const w = typeof text === "string" ? readEntry(text, now) : undefined;
      if (w) out.push(w);
      else logger().warn("autoscale demand: unreadable window skipped");
    }
    return out;
  }
}
