/**
 * Scenario: a FleetManager process (the gateway's control plane) drains
 * node-a while the replacement on node-b is still loading its weights (a
 * sim-engine with a 3 s startup), and is killed with SIGKILL. A new process
 * on the same data_dir resumes the drain: it adopts the replacement instead
 * of launching another, keeps the original serving until the replacement is
 * Ready, then stops it; the drain finishes and node-a ends empty.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AgentState } from "../../src/protocol/agent-messages.ts";
import { spawnLlmgw } from "../../src/shared/llmgw-child.ts";
import { ADMIN_TOKEN, AGENT_TOKEN, capturedGpus, startAgent, type TestAgent } from "../helpers/fleet.ts";
import { type Started, stopAll, waitUntil } from "../helpers/processes.ts";

const SCRIPT = join(import.meta.dir, "..", "helpers", "fleet-manager-process.ts");
const STARTUP_MS = 3_000;
const tmp = mkdtempSync(join(tmpdir(), "fleet-sigkill-drain-"));
let a: TestAgent;
let b: TestAgent;

type SinkEvent = { kind: "add" | "remove" | "draining"; id: string; node?: string; draining?: boolean };

function sinkEvents(p: Started): SinkEvent[] {
  return p
    .output()
    .split("\n")
    .filter((l) => l.startsWith('{"fleetSink"'))
    .map((l) => (JSON.parse(l) as { fleetSink: SinkEvent }).fleetSink);
}

async function agentState(agent: TestAgent): Promise<AgentState> {
  return (await (await fetch(`${agent.url}/v1/state`, { headers: { authorization: `Bearer ${AGENT_TOKEN}` } })).json()) as AgentState;
}

function startManager(): Promise<Started> {
  const config = {
    data_dir: join(tmp, "data"),
    nodes: [
      { name: "node-a", url: a.url, token: AGENT_TOKEN },
      { name: "node-b", url: b.url, token: AGENT_TOKEN },
    ],
    fleet: {
      agent_poll_interval_ms: 200,
      node_not_ready_after_ms: 2_000,
      reconcile_interval_ms: 200,
      models: [{ name: "sim-llama", engine: "sim", replicas: 1, startup_ms: STARTUP_MS }],
    },
  };
  return spawnLlmgw([JSON.stringify(config)], { script: SCRIPT, timeoutMs: 20_000, env: { LLMGW_LOG_LEVEL: "info" } });
}

beforeAll(async () => {
  [a, b] = await Promise.all([
    startAgent("node-a", join(tmp, "a"), capturedGpus("h200", 2, "aa")),
    startAgent("node-b", join(tmp, "b"), capturedGpus("h100", 2, "bb")),
  ]);
});

afterAll(async () => {
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

describe("a control plane killed mid-drain", () => {
  test("resumes the drain after a restart: no duplicate, the original stops only once the replacement serves", async () => {
    const first = await startManager();
    const original = await waitUntil(() => sinkEvents(first).find((e) => e.kind === "add"), { timeoutMs: 20_000, what: "first replica Ready" });
    expect(original.node).toBe("node-a");

    const res = await fetch(`${first.urls.admin}/admin/v1/fleet/nodes/node-a/drain`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ grace_ms: 60_000 }),
    });
    expect(res.status).toBe(202);
    const replacement = await waitUntil(async () => (await agentState(b)).replicas.find((r) => r.model === "sim-llama"), {
      what: "replacement launched on node-b",
    });
    expect(replacement.state).not.toBe("Ready"); // still loading its weights
    await first.stop("SIGKILL");
    expect(sinkEvents(first).filter((e) => e.kind === "remove")).toEqual([]);
    expect((await agentState(a)).replicas.map((r) => r.id)).toEqual([original.id]);

    const second = await startManager();
    await waitUntil(async () => (await agentState(a)).replicas.length === 0, { timeoutMs: 20_000, what: "original stopped" });
    const events = sinkEvents(second);
    const addReplacement = events.findIndex((e) => e.kind === "add" && e.id === replacement.id);
    const removeOriginal = events.findIndex((e) => e.kind === "remove" && e.id === original.id);
    expect(addReplacement).toBeGreaterThanOrEqual(0);
    expect(removeOriginal).toBeGreaterThan(addReplacement);
    // The one replica node-b runs is the one the killed process launched.
    expect((await agentState(b)).replicas.map((r) => r.id)).toEqual([replacement.id]);
    const drain = await waitUntil(
      async () => {
        const d = (await (await fetch(`${second.urls.admin}/admin/v1/fleet/nodes/node-a/drain`)).json()) as { state: string };
        return d.state === "done" ? d : null;
      },
      { what: "drain done" },
    );
    expect(drain).toMatchObject({ state: "done", waiting_for: [] });
    await second.stop();
  }, 60_000);
});
