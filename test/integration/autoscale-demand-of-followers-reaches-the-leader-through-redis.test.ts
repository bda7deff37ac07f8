/**
 * Several gateways on a real redis-server: the requests a follower serves
 * count in the leader's autoscaling decisions (the follower publishes its
 * windows, the leader takes them at each decision), so load that reaches
 * only the follower still scales the model up; in flight counts the latest
 * each follower said, stale windows do not count, and with Redis gone the
 * leader decides on its own.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { DemandSignals, mergeWindows } from "../../src/control/autoscale/demand.ts";
import { FleetAutoscaler } from "../../src/control/autoscale/fleet-autoscaler.ts";
import { logger, setLogLevel } from "../../src/shared/logger.ts";
import { AutoscaleDemandExchange } from "../../src/shared-state/autoscale-demand-exchange.ts";
import { RedisConnection } from "../../src/shared-state/redis-connection.ts";
import { LiteralFleet, runFor } from "../helpers/autoscaled-fleet.ts";
import { describeWithRedis, type RedisServer, startRedisServer, stopRedisServers } from "../helpers/redis-server.ts";

let server: RedisServer;
const conns: RedisConnection[] = [];

async function exchange(prefix: string, me: string): Promise<AutoscaleDemandExchange> {
  const conn = new RedisConnection(server.url, { commandTimeoutMs: 500, reconnectEveryMs: 50 });
  await conn.connect();
  conns.push(conn);
  return new AutoscaleDemandExchange(conn, { prefix, me });
}

/** A leader and a follower, each with its own demand and its own connection, on one clock. */
async function pair(prefix: string) {
  const clock = { now: 0 };
  const leaderFleet = new LiteralFleet(1, clock);
  const followerFleet = new LiteralFleet(1, clock);
  followerFleet.leader = false;
  const leaderDemand = new DemandSignals();
  const followerDemand = new DemandSignals();
  const leader = new FleetAutoscaler(leaderFleet, leaderDemand, { now: () => clock.now, log: logger(), peers: await exchange(prefix, "gw-leader") });
  const follower = new FleetAutoscaler(followerFleet, followerDemand, { now: () => clock.now, log: logger(), peers: await exchange(prefix, "gw-follower") });
  await leader.tick();
  await follower.tick();
  return { clock, leaderFleet, leader, follower, followerDemand };
}

/** The follower serves `rps` a second for `seconds`; the leader sees none of it itself. */
async function followerLoad(p: Awaited<ReturnType<typeof pair>>, seconds: number, rps: number) {
  for (let s = 0; s < seconds; s++) {
    await runFor(1, p.follower, p.followerDemand, p.clock, rps);
    await p.leader.tick();
  }
}

describeWithRedis("autoscaling demand across gateways", () => {
  beforeAll(async () => {
    setLogLevel("silent");
    server = await startRedisServer();
  });
  afterAll(async () => {
    for (const c of conns) c.close();
    await stopRedisServers();
    setLogLevel("info");
  });

  test("load that reaches only the follower scales the model up on the leader; the follower changes nothing itself", async () => {
    const p = await pair("a1:");
    await followerLoad(p, 20, 10);
    const decisions = p.leader.status()[0]!.decisions;
    expect(decisions.length).toBeGreaterThan(10);
    expect(Math.max(...decisions.map((d) => d.figures.arrival_rps ?? 0))).toBeGreaterThan(5);
    expect(p.leaderFleet.model.replicas).toBeGreaterThanOrEqual(3);
    expect(p.follower.status()[0]!.decisions).toEqual([]);
  });

  test("with Redis gone the leader decides on its own: no error, no arrivals it did not see", async () => {
    const p = await pair("a2:");
    await server.stop();
    try {
      await followerLoad(p, 5, 10);
      const decisions = p.leader.status()[0]!.decisions;
      expect(decisions.length).toBeGreaterThan(2);
      expect(decisions.every((d) => (d.figures.arrival_rps ?? 0) === 0)).toBe(true);
    } finally {
      await server.start();
    }
  });

  test("merging: arrivals and latencies add up, in flight is each follower's latest, a stale window does not count", () => {
    const own = { arrivals: 5, inflight: 2, ttftMs: [100], itlMs: [20], promptTokens: 50 };
    const w = (gateway: string, ageMs: number, arrivals: number, inflight: number) => ({
      gateway,
      model: "m",
      ageMs,
      arrivals,
      inflight,
      ttftMs: [200],
      itlMs: [30],
      promptTokens: 10,
    });
    const merged = mergeWindows(own, [w("a", 2_000, 3, 7), w("a", 500, 4, 9), w("b", 800, 1, 1), w("c", 60_000, 100, 100)], 3_000);
    expect(merged).toEqual({ arrivals: 13, inflight: 12, ttftMs: [100, 200, 200, 200], itlMs: [20, 30, 30, 30], promptTokens: 80 });
    expect(own.ttftMs).toEqual([100]);
  });
});
