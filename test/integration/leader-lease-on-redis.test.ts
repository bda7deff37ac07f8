/**
 * The reconciler lease on a real redis-server: one leader at a time, a new
 * and higher fencing token each term, a silent leader replaced within one
 * lease period, a clean stop handing over at once, and a leader cut off from
 * Redis stepping down by the time another may take over.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { setLogLevel } from "../../src/shared/logger.ts";
import { LeaderLease } from "../../src/shared-state/leader-lease.ts";
import { RedisConnection } from "../../src/shared-state/redis-connection.ts";
import { waitUntil } from "../helpers/processes.ts";
import { describeWithRedis, type RedisServer, startRedisServer, stopRedisServers } from "../helpers/redis-server.ts";

const LEASE_MS = 600;
let server: RedisServer;
const conns: RedisConnection[] = [];
const leases: LeaderLease[] = [];

async function contender(me: string, prefix: string): Promise<{ lease: LeaderLease; conn: RedisConnection }> {
  const conn = new RedisConnection(server.url, { commandTimeoutMs: 300, reconnectEveryMs: 50 });
  await conn.connect();
  const lease = new LeaderLease(conn, { me, leaseMs: LEASE_MS, prefix });
  conns.push(conn);
  leases.push(lease);
  lease.start();
  return { lease, conn };
}

describeWithRedis("leader lease", () => {
  beforeAll(async () => {
    setLogLevel("silent");
    server = await startRedisServer();
  });
  afterAll(async () => {
    for (const l of leases) await l.stop();
    for (const c of conns) c.close();
    await stopRedisServers();
    setLogLevel("info");
  });

  test("one leader; a silent leader is replaced within one lease period with a higher token; a clean stop hands over at once", async () => {
    const gws = await Promise.all(["a", "b", "c"].map((me) => contender(me, "t1:")));
    const leaderOf = () => gws.filter((g) => g.lease.isLeader());
    const first = await waitUntil(() => (leaderOf().length === 1 ? leaderOf()[0] : undefined), { what: "one leader" });
    const t1 = first.lease.fencingToken()!;
    expect(t1).toBeGreaterThan(Date.now() - 60_000); // at least Redis's clock in ms: higher than any token before a data loss
    for (let i = 0; i < 10; i++) {
      expect(leaderOf().length).toBeLessThanOrEqual(1);
      await Bun.sleep(LEASE_MS / 5);
    }
    expect(leaderOf()).toEqual([first]);

    // The leader goes silent (as if SIGKILLed: no release, no renewal).
    first.conn.close();
    const silentAt = Date.now();
    const second = await waitUntil(() => gws.find((g) => g !== first && g.lease.isLeader()), { timeoutMs: 3 * LEASE_MS, intervalMs: 5, what: "a new leader" });
    const takeoverMs = Date.now() - silentAt;
    expect(takeoverMs).toBeLessThanOrEqual(LEASE_MS + 50);
    const t2 = second.lease.fencingToken()!;
    expect(t2).toBeGreaterThan(t1);
    // The silent one stepped down by the time the other took over.
    expect(first.lease.isLeader()).toBe(false);

    const stoppedAt = Date.now();
    await second.lease.stop();
    const third = await waitUntil(() => gws.find((g) => g !== first && g !== second && g.lease.isLeader()), {
      timeoutMs: 3 * LEASE_MS,
      intervalMs: 5,
      what: "the last one leads",
    });
    expect(Date.now() - stoppedAt).toBeLessThan(LEASE_MS);
    expect(third.lease.fencingToken()).toBeGreaterThan(t2);
  });

  test("a leader that cannot reach Redis steps down no later than the lease would lapse", async () => {
    const solo = await contender("solo", "t2:");
    await waitUntil(() => solo.lease.isLeader(), { what: "solo leads" });
    const before = solo.lease.fencingToken()!;
    await server.stop();
    const downAt = Date.now();
    await waitUntil(() => !solo.lease.isLeader(), { timeoutMs: 2 * LEASE_MS, intervalMs: 5, what: "solo steps down" });
    expect(Date.now() - downAt).toBeLessThanOrEqual(LEASE_MS + 20);
    await server.start();
    // Redis is back, empty: the lease is taken again, and the token still rises (agents would refuse a lower one).
    await waitUntil(() => solo.lease.isLeader(), { timeoutMs: 5_000, what: "solo leads again" });
    expect(solo.lease.fencingToken()).toBeGreaterThan(before);
  });
});
