/**
 * Scenario: whoever holds the shared registration token used to be able to
 * take over another node's name at any URL: the real node went Unknown and
 * the gateway polled the impostor. Now the first agent that registers a name
 * binds it to its own node key (made at its first start, kept in its state
 * directory), and a registration under that name without the same key is
 * 409 NODE_NAME_BOUND — before and after a gateway restart, and on another
 * gateway sharing the store (Redis). The real agent keeps its name across
 * its own restart and a move to another port; a new agent gets the name
 * only after an operator approves the re-bind with `llmgw ctl rebind`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Gateway, startGateway } from "../helpers/cluster.ts";
import { ADMIN_TOKEN, capturedGpus, REGISTRATION_TOKEN, startAgent, type TestAgent } from "../helpers/fleet.ts";
import { ctl } from "../helpers/fleet-gateway.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { describeWithRedis, startRedisServer, stopRedisServers } from "../helpers/redis-server.ts";

const tmp = mkdtempSync(join(tmpdir(), "node-binding-"));
const NODE = "gpu-01";
const ROGUE_URL = "http://127.0.0.1:9";

afterAll(async () => {
  await stopAll();
  await stopRedisServers();
  rmSync(tmp, { recursive: true, force: true });
});

function fleetConfig(dataDir: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    data_dir: dataDir,
    fleet: {
      admin_token: ADMIN_TOKEN,
      registration_token: REGISTRATION_TOKEN,
      agent_poll_interval_ms: 200,
      node_not_ready_after_ms: 1_500,
      registration_interval_ms: 300,
    },
    ...extra,
  };
}

interface NodeView {
  name: string;
  url: string;
  state: string;
}

async function node(gw: Gateway, name = NODE): Promise<NodeView | undefined> {
  const r = (await (await fetch(`${gw.admin}/admin/v1/fleet/nodes`)).json()) as { nodes: NodeView[] };
  return r.nodes.find((n) => n.name === name);
}

/** A registration as a holder of the registration token sends it (the impostor). */
async function register(gw: Gateway, body: Record<string, unknown>): Promise<{ status: number; code: string | undefined; message: string | undefined }> {
  const res = await fetch(`${gw.admin}/admin/v1/fleet/register`, {
    method: "POST",
    headers: { authorization: `Bearer ${REGISTRATION_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as { error?: { code: string; message: string } };
  return { status: res.status, code: json.error?.code, message: json.error?.message };
}

function agentArgs(gw: Gateway, name = NODE): string[] {
  return ["--register", gw.admin, "--registration-token", REGISTRATION_TOKEN, "--node-name", name];
}

/** Takeover attempts: no key, and a key of its own. Each must be refused and leave the node where it is. */
async function expectTakeoverRefused(gw: Gateway, realUrl: string): Promise<void> {
  for (const attempt of [{}, { node_key: "k".repeat(43) }]) {
    const r = await register(gw, { node: NODE, url: ROGUE_URL, token: "rogue-token", ...attempt });
    expect({ status: r.status, code: r.code }).toEqual({ status: 409, code: "NODE_NAME_BOUND" });
    expect(r.message).toContain(`bin/llmgw ctl rebind ${NODE}`);
  }
  expect((await node(gw))?.url).toBe(realUrl);
}

describe("a bound node name", () => {
  let gw: Gateway;
  let real: TestAgent;
  const dataDir = join(tmp, "data");

  beforeAll(async () => {
    gw = await startGateway(fleetConfig(dataDir));
    real = await startAgent(NODE, join(tmp, "real"), capturedGpus("h100", 1, "real"), agentArgs(gw));
    await waitUntil(async () => (await node(gw))?.state === "Ready", { timeoutMs: 20_000, what: "the real node Ready" });
  }, 60_000);

  test("the first agent's registration binds the name to its own key, kept in its state directory (0600)", () => {
    const keyFile = join(real.dir, "state", "node-key");
    expect(readFileSync(keyFile, "utf8").trim()).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
  });

  test("a holder of the registration token cannot take the name over; the node stays Ready at its own URL", async () => {
    await expectTakeoverRefused(gw, real.url);
    // Past the NotReady time: the gateway still polls the real agent, never the impostor.
    await Bun.sleep(1_800);
    expect(await node(gw)).toMatchObject({ url: real.url, state: "Ready" });
  }, 30_000);

  test("after a gateway restart the binding holds, and the real agent registers again", async () => {
    await gw.stop("SIGTERM");
    gw = await startGateway(fleetConfig(dataDir));
    await expectTakeoverRefused(gw, real.url);
    await waitUntil(async () => (await node(gw))?.state === "Ready", { timeoutMs: 20_000, what: "the real node Ready after the gateway restart" });
    expect(real.child.output()).not.toContain("NODE_NAME_BOUND");
  }, 60_000);

  test("the real agent restarted on another port keeps its name (same state directory, same key)", async () => {
    await real.child.stop("SIGTERM");
    const moved = await startAgent(NODE, real.dir, capturedGpus("h100", 1, "real"), agentArgs(gw));
    expect(moved.url).not.toBe(real.url);
    await waitUntil(async () => (await node(gw))?.url === moved.url, { timeoutMs: 10_000, what: "the node followed to its new port" });
    real = moved;
  }, 60_000);

  test("a new agent under the name is refused until an operator approves the re-bind with ctl; then it holds the name and the old one is refused", async () => {
    const newcomer = await startAgent(NODE, join(tmp, "newcomer"), capturedGpus("h100", 1, "new"), agentArgs(gw));
    await waitUntil(() => newcomer.child.output().includes("NODE_NAME_BOUND"), { timeoutMs: 10_000, what: "the newcomer told why it is refused" });
    expect((await node(gw))?.url).toBe(real.url);
    await newcomer.child.stop("SIGTERM");

    await real.child.stop("SIGTERM");
    const approved = await ctl(gw, ["rebind", NODE]);
    expect({ code: approved.code, out: approved.out }).toEqual({ code: 0, out: expect.stringContaining("re-bind approved") });
    const replacement = await startAgent(NODE, join(tmp, "newcomer"), capturedGpus("h100", 1, "new"), agentArgs(gw));
    await waitUntil(async () => (await node(gw))?.url === replacement.url, { timeoutMs: 10_000, what: "the name moved to the approved agent" });
    await waitUntil(async () => (await node(gw))?.state === "Ready", { timeoutMs: 10_000, what: "the moved node Ready" });

    const old = await startAgent(NODE, real.dir, capturedGpus("h100", 1, "real"), agentArgs(gw));
    await waitUntil(() => old.child.output().includes("NODE_NAME_BOUND"), { timeoutMs: 10_000, what: "the old agent refused" });
    expect((await node(gw))?.url).toBe(replacement.url);
  }, 90_000);

  test("rebind of an unknown node is 404 through ctl (exit 6), and needs the admin token", async () => {
    expect((await ctl(gw, ["rebind", "no-such-node"])).code).toBe(6);
    const res = await fetch(`${gw.admin}/admin/v1/fleet/nodes/${NODE}/rebind`, { method: "POST" });
    expect(res.status).toBe(401);
  });
});

describeWithRedis("a bound node name across gateways sharing Redis", () => {
  test("a name bound through one gateway is refused to an impostor on the other", async () => {
    const redis = await startRedisServer();
    const state = { state: { backend: "redis", redis_url: redis.url } };
    const [a, b] = await Promise.all([startGateway(fleetConfig(join(tmp, "ra"), state)), startGateway(fleetConfig(join(tmp, "rb"), state))]);
    const agent = await startAgent("gpu-r", join(tmp, "redis-agent"), capturedGpus("h100", 1, "redis"), agentArgs(a!, "gpu-r"));
    await waitUntil(async () => (await node(b!, "gpu-r"))?.url === agent.url, { timeoutMs: 20_000, what: "the other gateway sees the node" });
    const r = await register(b!, { node: "gpu-r", url: ROGUE_URL, token: "rogue", node_key: "r".repeat(43) });
    expect({ status: r.status, code: r.code }).toEqual({ status: 409, code: "NODE_NAME_BOUND" });
    await Bun.sleep(500);
    for (const gw of [a!, b!]) expect((await node(gw, "gpu-r"))?.url).toBe(agent.url);
  }, 60_000);
});
