/**
 * Must-show (issue 14): a tenant's requests spread over three gateways
 * sharing Redis are limited to its quota within 5 %; and a prompt prefix goes
 * to the same engine whichever gateway it arrives at (prefix-rendezvous).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { ACME_KEY, type ClusterGateway, FREE_KEY, startTenantCluster } from "../helpers/gateway-cluster.ts";
import { stopAll } from "../helpers/processes.ts";
import { describeWithRedis, startRedisServer, stopRedisServers } from "../helpers/redis-server.ts";

const RPM = 600;
const WINDOW_MS = 15_000;
let gws: ClusterGateway[];

describeWithRedis("three gateways, one quota", () => {
  beforeAll(async () => {
    const redis = await startRedisServer();
    // (N + 1) allowances of 1 % is the most that may sit unspent: 4 % of a minute's quota, under 3 % of this test's.
    gws = await startTenantCluster(redis, RPM, { itlMs: 1, state: { quota_allowance: 0.01, lease_ms: 2_000, sync_interval_ms: 500 } });
  }, 90_000);

  afterAll(async () => {
    await stopAll();
    await stopRedisServers();
  });

  const chat = (gw: ClusterGateway, key: string, content: string) =>
    fetch(`${gw.api}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: "m", max_tokens: 1, messages: [{ role: "user", content }] }),
    });

  test("requests spread over all gateways are held to the tenant's quota within 5 %", async () => {
    const statuses = new Map<number, number>();
    const perGateway = [0, 0, 0];
    let next = 0;
    const started = Date.now();
    // 12 clients, each request to the next gateway in turn, faster than the quota allows.
    await Promise.all(
      Array.from({ length: 12 }, async () => {
        while (Date.now() - started < WINDOW_MS) {
          const i = next++ % gws.length;
          const res = await chat(gws[i]!, ACME_KEY, "hello");
          await res.arrayBuffer();
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          if (res.status === 200) perGateway[i]!++;
          if (res.status === 429) await Bun.sleep(5);
        }
      }),
    );
    const elapsedMs = Date.now() - started;
    const admitted = statuses.get(200) ?? 0;
    const quota = RPM + (RPM / 60_000) * elapsedMs; // a minute's burst plus the refill while the test ran
    expect([...statuses.keys()].sort()).toEqual([200, 429]);
    expect(Math.abs(admitted - quota) / quota).toBeLessThan(0.05);
    expect(admitted).toBeLessThanOrEqual(Math.ceil(quota) + 1); // never over
    // Every gateway admitted a fair part of it.
    for (const n of perGateway) expect(n).toBeGreaterThan(admitted / 6);
    const statusesNow = await Promise.all(gws.map((g) => g.cluster()));
    const decisions = statusesNow.reduce((n, c) => n + c.quota.local + c.quota.fetched, 0);
    expect(decisions).toBe(admitted);
    console.log(JSON.stringify({ admitted, quota: Math.round(quota), error: (admitted - quota) / quota, perGateway, refused: statuses.get(429) }));
  }, 60_000);

  test("a prompt prefix reaches the same engine whichever gateway it arrives at", async () => {
    for (let p = 0; p < 6; p++) {
      const prompt = `Shared system prompt number ${p}. `.repeat(20) + `question ${p}`;
      const served = await Promise.all(
        gws.map(async (gw) => {
          const res = await chat(gw, FREE_KEY, prompt);
          await res.arrayBuffer();
          expect(res.status).toBe(200);
          return res.headers.get("x-llmgw-endpoint");
        }),
      );
      expect(new Set(served).size).toBe(1);
    }
  });
});
