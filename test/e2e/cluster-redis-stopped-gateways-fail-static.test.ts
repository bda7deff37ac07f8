/**
 * Must-show (issue 14): Redis stops under three gateways. Interactive
 * traffic through all of them continues with zero errors; each gateway says
 * it is failing static (/readyz detail, metrics), refuses what needs the
 * store (an idempotent request, the batch API) with 503 STATE_UNAVAILABLE and
 * enforces its share of a tenant's quota; no gateway keeps the reconciler lease. When Redis returns
 * (with its data), everything converges: Redis reachable everywhere, one
 * leader with a higher token, shares exchanged, quotas shared again.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { counterValue } from "../helpers/cluster.ts";
import { ACME_KEY, type ClusterGateway, FREE_KEY, leaderOf, startTenantCluster } from "../helpers/gateway-cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { describeWithRedis, type RedisServer, startRedisServer, stopRedisServers } from "../helpers/redis-server.ts";

const RPM = 600;
let redis: RedisServer;
let gws: ClusterGateway[];

describeWithRedis("Redis stops under three gateways", () => {
  beforeAll(async () => {
    redis = await startRedisServer({ persist: true });
    gws = await startTenantCluster(redis, RPM, { itlMs: 2, state: { lease_ms: 1_500, sync_interval_ms: 500, command_timeout_ms: 300 } });
  }, 90_000);

  afterAll(async () => {
    await stopAll();
    await stopRedisServers();
  });

  const stream = async (gw: ClusterGateway, key: string): Promise<{ status: number; complete: boolean }> => {
    const res = await fetch(`${gw.api}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: "m", stream: true, max_tokens: 3, messages: [{ role: "user", content: "hi" }] }),
    });
    const text = await res.text();
    return { status: res.status, complete: text.trimEnd().endsWith("data: [DONE]") && !text.includes('"error"') };
  };

  test("interactive traffic carries on without an error, quotas fail static at each gateway's share, and everything converges when Redis returns", async () => {
    const before = await leaderOf(gws);
    const tokenBefore = (await before.cluster()).leader.token!;
    const errors: string[] = [];
    let served = 0;
    let running = true;
    let next = 0;
    const traffic = Promise.all(
      Array.from({ length: 6 }, async () => {
        while (running) {
          const gw = gws[next++ % gws.length]!;
          const r = await stream(gw, FREE_KEY).catch((err: unknown) => ({ status: 0, complete: false, err }));
          if (r.status === 200 && r.complete) served++;
          else errors.push(`${gw.name}: ${r.status}`);
        }
      }),
    );
    await Bun.sleep(1_000);

    await redis.stop();
    await waitUntil(async () => (await Promise.all(gws.map((g) => g.readyz()))).every((r) => r.ready && r.state?.fail_static === true && !r.state.redis_up), {
      timeoutMs: 5_000,
      what: "every gateway failing static",
    });
    for (const gw of gws) expect(counterValue(await gw.metrics(), "llmgw_state_redis_up")).toBe(0);
    // The lease lapses everywhere: nobody acts on the fleet while Redis is away.
    await waitUntil(async () => (await Promise.all(gws.map((g) => g.cluster()))).every((c) => !c.leader.self), { timeoutMs: 3_000, what: "no leader" });

    // What needs the shared store is refused, clearly: an idempotent request, the batch list.
    const idem = await fetch(`${gws[1]!.api}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${FREE_KEY}`, "idempotency-key": "during-the-outage" },
      body: JSON.stringify({ model: "m", max_tokens: 1, messages: [{ role: "user", content: "hi" }] }),
    });
    const batches = await fetch(`${gws[2]!.api}/v1/batches`, { headers: { authorization: `Bearer ${FREE_KEY}` } });
    for (const res of [idem, batches]) {
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBe("1");
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("STATE_UNAVAILABLE");
    }

    // Quota while failing static: this gateway enforces its third of the minute (plus what refills meanwhile).
    let admitted = 0;
    const hammered = performance.now();
    for (let i = 0; i < 260; i++) if ((await stream(gws[0]!, ACME_KEY)).status === 200) admitted++;
    // The share refills at its third of the rate while the loop runs, which on a busy host is longer.
    const refilled = Math.ceil(((RPM / 3) * (performance.now() - hammered)) / 60_000);
    expect(admitted).toBeGreaterThanOrEqual(RPM / 3);
    expect(admitted).toBeLessThanOrEqual(RPM / 3 + refilled + 1);
    expect(counterValue(await gws[0]!.metrics(), "llmgw_quota_decisions_total", { source: "fail_static" })).toBe(admitted);

    await Bun.sleep(500);
    await redis.start();
    await waitUntil(
      async () => (await Promise.all(gws.map((g) => g.readyz()))).every((r) => r.state?.redis_up === true && !r.state.fail_static && r.state.gateways === 3),
      {
        timeoutMs: 10_000,
        what: "every gateway back on Redis, seeing the others",
      },
    );
    const after = await leaderOf(gws);
    expect((await after.cluster()).leader.token!).toBeGreaterThan(tokenBefore);
    // Quotas are shared again: the next admission comes from Redis (another gateway's tenant bucket, fetched), not a local share.
    const fetchedBefore = (await gws[1]!.cluster()).quota.fetched;
    expect((await stream(gws[1]!, ACME_KEY)).status).toBe(200);
    expect((await gws[1]!.cluster()).quota.fetched).toBe(fetchedBefore + 1);

    running = false;
    await traffic;
    expect(errors).toEqual([]);
    expect(served).toBeGreaterThan(100);
  }, 90_000);
});
