/**
 * Scenario: a real `llmgw agent --register` joins a fleet that lists no
 * nodes: it registers on the management API with the shared token, is
 * polled, and receives a replica (a real sim-engine) that becomes Ready.
 * Restarted on another port it registers again and the gateway follows it.
 * An agent with the wrong registration token is refused and says so.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setLogLevel } from "../../src/shared/logger.ts";
import { AGENT_TOKEN, capturedGpus, REGISTRATION_TOKEN, serveFleetApi, startAgent, startFleet, type TestFleet } from "../helpers/fleet.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const tmp = mkdtempSync(join(tmpdir(), "agent-register-"));
let fleet: TestFleet;
let api: { url: string; stop(): Promise<void> };

beforeAll(async () => {
  setLogLevel("warn");
  fleet = await startFleet({
    data_dir: join(tmp, "data"),
    fleet: {
      agent_poll_interval_ms: 200,
      node_not_ready_after_ms: 1_500,
      reconcile_interval_ms: 200,
      models: [{ name: "sim-llama", engine: "sim", replicas: 1 }],
    },
  });
  api = serveFleetApi(fleet.manager);
});

afterAll(async () => {
  await api.stop();
  await fleet.stop();
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
  setLogLevel("info");
});

describe("agent self-registration", () => {
  test("an agent registers, is polled and gets a replica; restarted elsewhere it registers again", async () => {
    const args = ["--register", api.url, "--registration-token", REGISTRATION_TOKEN, "--node-name", "gpu-07"];
    const agent = await startAgent("gpu-07", join(tmp, "a"), capturedGpus("h200", 1, "reg"), args);
    await waitUntil(() => fleet.sink.serving().length === 1, { timeoutMs: 20_000, what: "a replica on the registered node" });
    expect(fleet.sink.serving()[0]!.node).toBe("gpu-07");
    const entry = fleet.manager.state.registry.get("gpu-07")!;
    expect(entry).toMatchObject({ source: "registered", url: agent.url, token: AGENT_TOKEN });
    expect((await fleet.store.nodes.list()).map((n) => n.url)).toEqual([agent.url]);
    expect(agent.child.output()).toContain('"msg":"registered with the gateway"');

    // Same node, new port: the registration moves the gateway's polls to it.
    await agent.child.stop("SIGTERM");
    const moved = await startAgent("gpu-07", join(tmp, "a"), capturedGpus("h200", 1, "reg"), args);
    expect(moved.url).not.toBe(agent.url);
    await waitUntil(() => fleet.manager.state.registry.get("gpu-07")?.url === moved.url, { what: "registration follows the agent" });
    await waitUntil(() => fleet.manager.state.registry.state("gpu-07", Date.now(), 1_500) === "Ready", { what: "moved node Ready" });
    // Its engine stopped with the old agent: the replica is launched again through the new address.
    const relaunched = await waitUntil(
      async () => {
        const res = await fetch(`${moved.url}/v1/state`, { headers: { authorization: `Bearer ${AGENT_TOKEN}` } });
        const state = (await res.json()) as { replicas: { id: string; state: string; endpoint: string }[] };
        return state.replicas.find((r) => r.state === "Ready");
      },
      { timeoutMs: 20_000, what: "the replica relaunched on the moved agent" },
    );
    await waitUntil(() => fleet.sink.serving().some((e) => e.id === relaunched.id && e.url === relaunched.endpoint), { what: "the replica back in rotation" });
  }, 60_000);

  test("a wrong registration token is refused, and the agent says why", async () => {
    const agent = await startAgent("intruder", join(tmp, "b"), capturedGpus("h100", 1, "bad"), [
      "--register",
      api.url,
      "--registration-token",
      "not-the-token-at-all",
      "--node-name",
      "intruder",
    ]);
    await waitUntil(() => agent.child.output().includes("registration with the gateway failed"), { what: "refusal logged" });
    expect(agent.child.output()).toContain("HTTP 401");
    expect(fleet.manager.state.registry.get("intruder")).toBeUndefined();
  }, 30_000);
});
