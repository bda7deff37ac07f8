/**
 * Tenant quotas shared by three gateways (three ClusterQuota instances, each
 * with its own Redis connection) on a real redis-server: together they admit
 * what one bucket allows — never more, and less only by the allowances still
 * held — asking Redis about once per allowance; with Redis gone each enforces
 * its share.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { QuotaDecision } from "../../src/admission/tenant-quota.ts";
import type { TenantConfig } from "../../src/config/types.ts";
import { LlmgwError } from "../../src/shared/errors.ts";
import { setLogLevel } from "../../src/shared/logger.ts";
import { ClusterQuota } from "../../src/shared-state/cluster-quota.ts";
import { RedisConnection } from "../../src/shared-state/redis-connection.ts";
import { describeWithRedis, type RedisServer, startRedisServer, stopRedisServers } from "../helpers/redis-server.ts";

const RPM = 600;
const ALLOWANCE = 0.02; // 12 requests per fetch
let server: RedisServer;
const conns: RedisConnection[] = [];

async function gateways(prefix: string, tenants: TenantConfig[] = [{ name: "acme", requestsPerMinute: RPM, tokensPerMinute: undefined }]) {
  return Promise.all(
    [0, 1, 2].map(async () => {
      const conn = new RedisConnection(server.url, { commandTimeoutMs: 500, reconnectEveryMs: 50 });
      await conn.connect();
      conns.push(conn);
      return { conn, quota: new ClusterQuota(tenants, conn, { prefix, allowance: ALLOWANCE, gateways: () => 3 }) };
    }),
  );
}

async function tryAdmit(q: ClusterQuota, tenant = "acme", tokens = 1): Promise<boolean> {
  try {
    const d: QuotaDecision = await q.admit(tenant, tokens, Date.now());
    expect(Number(d.headers["x-ratelimit-remaining-requests"])).toBeGreaterThanOrEqual(0);
    return true;
  } catch (err) {
    if (err instanceof LlmgwError && err.code === "RATE_LIMITED") return false;
    throw err;
  }
}

describeWithRedis("cluster quota", () => {
  beforeAll(async () => {
    setLogLevel("silent");
    server = await startRedisServer();
  });
  afterAll(async () => {
    for (const c of conns) c.close();
    await stopRedisServers();
    setLogLevel("info");
  });

  test("three gateways admit what one bucket allows (its burst plus its refill), within one allowance each, at about one Redis call per allowance", async () => {
    const gws = await gateways("q1:");
    const commandsBefore = gws.reduce((n, g) => n + g.conn.commands, 0);
    const started = Date.now();
    let admitted = 0;
    let attempts = 0;
    // 3 s of requests spread round-robin over the gateways, faster than the limit.
    while (Date.now() - started < 3_000) {
      for (const g of gws) {
        attempts++;
        if (await tryAdmit(g.quota)) admitted++;
      }
      await Bun.sleep(2);
    }
    const elapsedS = (Date.now() - started) / 1000;
    const allowed = RPM + (RPM / 60) * elapsedS; // the burst plus the continuous refill
    const slack = (3 + 1) * Math.ceil(RPM * ALLOWANCE); // what may sit unspent in three allowances, and one refilling in the bucket
    expect(admitted).toBeLessThanOrEqual(Math.ceil(allowed) + 1);
    expect(admitted).toBeGreaterThanOrEqual(Math.floor(allowed) - slack);
    const commands = gws.reduce((n, g) => n + g.conn.commands, 0) - commandsBefore;
    // About one call per allowance of 12 admitted: the bucket is asked again only once an allowance has refilled.
    expect(commands / admitted).toBeLessThan(0.15);
    expect(commands / attempts).toBeLessThan(0.1);
  });

  test("an idle gateway gives its allowance back; refunds above two allowances go back too", async () => {
    const [a, b] = await gateways("q2:", [{ name: "acme", requestsPerMinute: RPM, tokensPerMinute: 6_000 }]);
    expect(await tryAdmit(a!.quota, "acme", 10)).toBe(true);
    const held = a!.quota.held("acme");
    expect(held.requests).toBe(11);
    expect(held.tokens).toBe(110); // 2 % of 6,000 = 120, less the 10 spent
    a!.quota.settle("acme", 500, 0, Date.now()); // 500 given back: more than two allowances now, the excess goes back
    await Bun.sleep(50);
    expect(a!.quota.held("acme").tokens).toBe(120);
    await a!.quota.tick(Date.now() + 5_000);
    expect(a!.quota.held("acme")).toEqual({ requests: 0, tokens: 0 });
    // What a gave back is there for b: the whole burst but the one request a spent.
    let n = 0;
    while (await tryAdmit(b!.quota, "acme", 1)) n++;
    expect(n).toBeGreaterThanOrEqual(RPM - 1 - 1);
    expect(n).toBeLessThanOrEqual(RPM - 1 + 1);
  });

  test("Redis gone: each gateway spends what it holds, then enforces its share of the limit", async () => {
    const gws = await gateways("q3:");
    expect(await tryAdmit(gws[0]!.quota)).toBe(true);
    await server.stop();
    try {
      await Bun.sleep(50);
      const counts = [];
      for (const g of gws) {
        let n = 0;
        for (let i = 0; i < 400; i++) if (await tryAdmit(g.quota)) n++;
        counts.push(n);
      }
      // 11 left in the first one's allowance, then 200 (600 / 3 gateways) each from a local bucket.
      expect(counts).toEqual([11 + RPM / 3, RPM / 3, RPM / 3]);
    } finally {
      await server.start();
    }
  });
});
