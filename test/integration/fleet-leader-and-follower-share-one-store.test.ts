/**
 * Scenario (issue 14): two fleet managers — two gateways — on one store. Only
 * the lease holder calls the agent; the follower hands the same Ready
 * replicas to its own gateway and takes operator changes, which the leader
 * acts on. The lease moves: the new leader re-reads the store and carries on
 * with the replicas the old one placed (none launched twice), and the old
 * leader calls no agent any more.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildConfig } from "../../src/config/load.ts";
import { type FleetLeadership, FleetManager } from "../../src/control/fleet-manager.ts";
import { SqliteFleetStore } from "../../src/control/sqlite-store.ts";
import { AgentPoller } from "../../src/polling/agent-poller.ts";
import { setLogLevel } from "../../src/shared/logger.ts";
import { agentGpus } from "../fixtures/fleet/gpus.ts";
import { type FakeAgent, startFakeAgent } from "../helpers/fake-agent.ts";
import { RecordingSink } from "../helpers/fleet.ts";
import { waitUntil } from "../helpers/processes.ts";

const tmp = mkdtempSync(join(tmpdir(), "fleet-two-gateways-"));
let agent: FakeAgent;

interface Gw {
  manager: FleetManager;
  sink: RecordingSink;
  lead: FleetLeadership & { leader: boolean };
  stop(): Promise<void>;
}

async function gateway(): Promise<Gw> {
  const config = buildConfig({
    data_dir: join(tmp, "data"),
    nodes: [{ name: agent.node, url: agent.url, token: agent.token }],
    fleet: {
      agent_poll_interval_ms: 100,
      agent_poll_timeout_ms: 500,
      reconcile_interval_ms: 100,
      drain_grace_ms: 500,
      models: [{ name: "m", engine: "vllm", replicas: 2 }],
    },
  });
  const store = new SqliteFleetStore(config.dataDir);
  const sink = new RecordingSink();
  const lead = { leader: false, isLeader: () => lead.leader, fencingToken: () => undefined, fenced: () => void (lead.leader = false), refreshEveryMs: 100 };
  let manager: FleetManager | undefined;
  const poller = new AgentPoller({ intervalMs: 100, timeoutMs: 500, staleAfterMs: 5_000 }, (node, snap) => manager?.onAgentSnapshot(node, snap));
  manager = await FleetManager.open({ config, store, sink, leadership: lead, pollAgents: (agents) => poller.setTargets(agents) });
  manager.start();
  poller.start();
  return {
    manager,
    sink,
    lead,
    async stop() {
      await poller.stop();
      await manager!.stop();
      await store.close();
    },
  };
}

let a: Gw;
let b: Gw;

beforeAll(async () => {
  setLogLevel("error");
  agent = startFakeAgent("node-1", agentGpus("h100", 4, "n1"));
  a = await gateway();
  b = await gateway();
  a.lead.leader = true;
});

afterAll(async () => {
  await a?.stop();
  await b?.stop();
  await agent?.stop();
  rmSync(tmp, { recursive: true, force: true });
  setLogLevel("info");
});

const ids = (g: Gw) =>
  g.sink
    .serving()
    .map((e) => e.id)
    .sort();

test("the leader places, the follower routes to the same replicas, and an operator change made on the follower is acted on by the leader", async () => {
  await waitUntil(() => ids(a).length === 2 && ids(b).length === 2, { timeoutMs: 10_000, what: "both gateways route to 2 replicas" });
  expect(ids(b)).toEqual(ids(a));
  expect(agent.puts.length).toBe(2);
  expect(b.manager.isLeader()).toBe(false);

  await b.manager.ops.patchModel("m", { replicas: 3 });
  await waitUntil(() => ids(a).length === 3 && ids(b).length === 3, { timeoutMs: 10_000, what: "3 replicas on both gateways" });
  expect(new Set(agent.puts.map((p) => p.id)).size).toBe(3);
});

test("the lease moves: the new leader carries on with the replicas in the store, nothing launched twice, the old leader calls no agent", async () => {
  const launched = new Set(agent.puts.map((p) => p.id));
  a.lead.leader = false;
  b.lead.leader = true;
  await a.manager.ops.patchModel("m", { replicas: 1 }); // a change on the new follower
  await waitUntil(() => ids(a).length === 1 && ids(b).length === 1 && agent.replicas.size === 1, { timeoutMs: 10_000, what: "scaled down to 1 everywhere" });
  expect(ids(a)).toEqual(ids(b));
  expect(new Set(agent.puts.map((p) => p.id))).toEqual(launched); // nothing new placed
  const deletes = agent.deletes.length;
  expect(deletes).toBe(2);
  // Back to 2: only the leader (b) launches; a follows.
  const putsBefore = agent.puts.length;
  await b.manager.ops.patchModel("m", { replicas: 2 });
  await waitUntil(() => ids(a).length === 2 && ids(b).length === 2, { timeoutMs: 10_000, what: "2 replicas again" });
  expect(agent.puts.length).toBe(putsBefore + 1);
  expect(agent.deletes.length).toBe(deletes);
});
