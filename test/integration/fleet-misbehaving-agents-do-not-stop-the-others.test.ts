/**
 * Scenario: four agents, three of them broken — one answers garbage, one
 * answers JSON of the wrong shape, one never answers, one refuses every
 * launch — and one that works. Reconciliation carries on for the good node
 * (its GPUs fill with Ready replicas), each broken node is NotReady with its
 * error on the node, and the refused replica fails with the agent's reason
 * on the replica, is replaced with backoff, and the backoff grows.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { modelsStatus, nodesStatus, replicasStatus } from "../../src/control/api-views.ts";
import type { FleetManager } from "../../src/control/fleet-manager.ts";
import { setLogLevel } from "../../src/shared/logger.ts";
import { agentGpus } from "../fixtures/fleet/gpus.ts";
import { type FakeAgent, startFakeAgent } from "../helpers/fake-agent.ts";
import { startFleet, type TestFleet } from "../helpers/fleet.ts";
import { waitUntil } from "../helpers/processes.ts";

const tmp = mkdtempSync(join(tmpdir(), "fleet-misbehaving-"));
const agents: FakeAgent[] = [];
let fleet: TestFleet;

beforeAll(async () => {
  setLogLevel("error");
  agents.push(
    startFakeAgent("good", agentGpus("h100", 2, "good")),
    startFakeAgent("garbage", agentGpus("h100", 2, "garb"), { mode: "garbage" }),
    startFakeAgent("wrong-shape", agentGpus("h100", 2, "shape"), { mode: "wrong-shape" }),
    startFakeAgent("silent", agentGpus("h100", 2, "silent"), { mode: "hang" }),
    startFakeAgent("refuser", agentGpus("h100", 2, "ref"), { mode: "refuse-launch" }),
  );
  fleet = await startFleet({
    data_dir: join(tmp, "data"),
    nodes: agents.map((a) => ({ name: a.node, url: a.url, token: a.token })),
    fleet: {
      agent_poll_interval_ms: 100,
      agent_poll_timeout_ms: 300,
      agent_call_timeout_ms: 1_000,
      node_not_ready_after_ms: 800,
      reconcile_interval_ms: 100,
      failure_backoff_base_ms: 300,
      models: [{ name: "m", engine: "vllm", replicas: 3 }],
    },
  });
});

afterAll(async () => {
  await fleet.stop();
  await Promise.all(agents.map((a) => a.stop()));
  rmSync(tmp, { recursive: true, force: true });
  setLogLevel("info");
});

const status = (m: FleetManager) => ({ nodes: nodesStatus(m, Date.now()), replicas: replicasStatus(m, Date.now()), models: modelsStatus(m, Date.now()) });

describe("agents that misbehave", () => {
  test("the good node gets its replicas while the others fail, each error on its node", async () => {
    await waitUntil(() => fleet.sink.serving().length === 2, { timeoutMs: 10_000, what: "2 replicas on the good node" });
    expect(fleet.sink.serving().map((e) => e.node)).toEqual(["good", "good"]);
    const { nodes } = status(fleet.manager);
    const byName = Object.fromEntries(nodes.map((n) => [n.name, n]));
    expect(byName.good).toMatchObject({ state: "Ready", last_error: null });
    expect(byName.garbage).toMatchObject({ state: "NotReady", last_error: "GET /v1/state: the answer is not JSON" });
    expect(byName["wrong-shape"]).toMatchObject({
      state: "NotReady",
      last_error: "GET /v1/state: not an agent state (gpus: Invalid input: expected array, received string)",
    });
    expect(byName.silent).toMatchObject({ state: "NotReady", last_error: "GET /v1/state: timed out after 300 ms" });
    expect(byName.refuser!.state).toBe("Ready");
  });

  test("a refused launch fails that replica with the agent's reason, and its replacement backs off", async () => {
    const refuser = agents.find((a) => a.node === "refuser")!;
    await waitUntil(() => refuser.puts.length >= 3, { timeoutMs: 15_000, what: "three refused launches" });
    const { replicas, models } = status(fleet.manager);
    const failed = replicas.failed.filter((f) => f.nodes.includes("refuser"));
    expect(failed.length).toBeGreaterThanOrEqual(2);
    expect(failed[0]!.reason).toBe("launch refused by refuser: gpu-in-use: GPU 0 is already used by replica 'someone-else'");
    const m = models.find((x) => x.name === "m")!;
    expect(m).toMatchObject({ desired: 3, serving: 2 });
    expect(m.failures).toBeGreaterThanOrEqual(2);
    // Exponential: 300 ms, 600 ms, 1.2 s … between attempts, never a tight loop.
    expect(refuser.puts.length).toBeLessThanOrEqual(6);
    expect(fleet.sink.serving().every((e) => e.node === "good")).toBe(true);
  }, 20_000);
});
