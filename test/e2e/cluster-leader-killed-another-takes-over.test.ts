/**
 * Must-show (issue 14): three gateways share one fleet through Redis over two
 * real agents. SIGKILL the gateway holding the reconciler lease: another takes
 * it within one lease period, reconciling carries on (a scale-up made through
 * a follower is placed), nothing is launched twice, and the agents refuse the
 * dead leader's fencing token.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FENCING_TOKEN_HEADER } from "../../src/protocol/agent-messages.ts";
import { AGENT_TOKEN, capturedGpus, startAgent, type TestAgent } from "../helpers/fleet.ts";
import { agentState, fleetCall, fleetGatewayConfig, serving } from "../helpers/fleet-gateway.ts";
import { type ClusterGateway, leaderOf, startGatewayCluster } from "../helpers/gateway-cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { describeWithRedis, startRedisServer, stopRedisServers } from "../helpers/redis-server.ts";

const MODEL = "sim-llama";
const LEASE_MS = 2_000;
const tmp = mkdtempSync(join(tmpdir(), "cluster-leader-e2e-"));
let a: TestAgent;
let b: TestAgent;
let gws: ClusterGateway[];

/** "id:pid" of every replica both agents run, sorted. */
async function running(): Promise<string[]> {
  const all = [...(await agentState(a)).replicas, ...(await agentState(b)).replicas];
  return all.map((r) => `${r.id}:${r.pid}`).sort();
}

async function allServe(gateways: readonly ClusterGateway[], n: number): Promise<boolean> {
  return (await Promise.all(gateways.map(async (g) => (await serving(g, MODEL)).length))).every((c) => c === n);
}

describeWithRedis("the reconciler's gateway is SIGKILLed", () => {
  beforeAll(async () => {
    const redis = await startRedisServer();
    [a, b] = await Promise.all([
      startAgent("node-a", join(tmp, "a"), capturedGpus("h200", 2, "aa")),
      startAgent("node-b", join(tmp, "b"), capturedGpus("h100", 2, "bb")),
    ]);
    const fleet = fleetGatewayConfig(join(tmp, "unused"), [a, b], { models: [{ name: MODEL, engine: "sim", replicas: 2, startup_ms: 300 }] });
    gws = await startGatewayCluster(redis, 3, { ...fleet, log_level: "warn" }, { state: { lease_ms: LEASE_MS, sync_interval_ms: 300 } });
    await waitUntil(() => allServe(gws, 2), { timeoutMs: 40_000, what: "2 replicas in rotation on every gateway" });
  }, 90_000);

  afterAll(async () => {
    await stopAll();
    await stopRedisServers();
    rmSync(tmp, { recursive: true, force: true });
  });

  test("another gateway leads within one lease period, carries on reconciling with nothing launched twice, and the old token is refused", async () => {
    const leader = await leaderOf(gws);
    const oldToken = (await leader.cluster()).leader.token!;
    const before = await running();
    expect(before).toHaveLength(2);

    const killedAt = Date.now();
    await leader.stop("SIGKILL");
    const rest = gws.filter((g) => g !== leader);
    const next = await leaderOf(rest, 3 * LEASE_MS);
    const takeoverMs = Date.now() - killedAt;
    console.error(`cluster e2e: leader SIGKILL → another gateway leads after ${takeoverMs} ms (lease_ms ${LEASE_MS})`);
    expect(takeoverMs).toBeLessThanOrEqual(LEASE_MS + 500);
    const newToken = (await next.cluster()).leader.token!;
    expect(newToken).toBeGreaterThan(oldToken);
    // Adopted, not relaunched: the same replicas, the same engine processes.
    await Bun.sleep(1_000);
    expect(await running()).toEqual(before);

    // Reconciling carries on: a scale-up asked of the follower is placed by the new leader, one replica per new GPU pair.
    const follower = rest.find((g) => g !== next)!;
    expect((await fleetCall(follower, "PATCH", `/models/${MODEL}`, { replicas: 4 })).status).toBe(200);
    await waitUntil(() => allServe(rest, 4), { timeoutMs: 30_000, what: "4 replicas in rotation on both gateways" });
    const after = await running();
    expect(after).toHaveLength(4);
    for (const r of before) expect(after).toContain(r);
    expect(new Set(after.map((r) => r.split(":")[0])).size).toBe(4);
    expect((await agentState(a)).replicas).toHaveLength(2);
    expect((await agentState(b)).replicas).toHaveLength(2);

    // Both agents have taken the new leader's token: the dead leader's is refused, and changes nothing.
    for (const agent of [a, b]) {
      const victim = (await agentState(agent)).replicas[0]!;
      const res = await fetch(`${agent.url}/v1/replicas/${victim.id}`, {
        method: "DELETE",
        headers: { authorization: `Bearer ${AGENT_TOKEN}`, [FENCING_TOKEN_HEADER]: String(oldToken) },
      });
      expect(res.status).toBe(409);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("STALE_FENCING_TOKEN");
      expect((await agentState(agent)).replicas.map((r) => r.id)).toContain(victim.id);
    }
    expect(await running()).toEqual(after);
  }, 90_000);
});
