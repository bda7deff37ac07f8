/**
 * `llmgw bench fleet`: the fleet manager under load. Two node agents on
 * simulated GPUs (a stand-in nvidia-smi, sim-engines as engines) and a
 * gateway with a fleet and no static endpoint; a model is scaled 1 → 4 → 1
 * through the management API while closed-loop streaming traffic runs.
 * Reports each replica's time to ready (placed → serving in the gateway),
 * the requests each served, how long the scale-up and scale-down took, and
 * errors: non-200 answers and streams without [DONE] or with an error event
 * (target 0).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SIM_H100, writeSimNvidiaSmi } from "../agent/sim-nvidia-smi.ts";
import { boolFlag, numberFlag } from "../shared/flags.ts";
import { type LlmgwChild, spawnLlmgw, writeGatewayConfig } from "../shared/llmgw-child.ts";
import { startCheckedLoad } from "./checked-stream-load.ts";
import { formatTable } from "./report.ts";
import type { BenchScenario } from "./scenario.ts";

const MODEL = "bench-fleet-model";
const AGENT_TOKEN = "bench-fleet-agent-token";
const ADMIN_TOKEN = "bench-fleet-admin-token-0123456789";
const NODES = ["node-a", "node-b"] as const;
const SAMPLE_MS = 50;

export interface FleetBenchOptions {
  clients: number;
  maxTokens: number;
  holdMs: number;
  startupMs: number;
  gpusPerNode: number;
  log?: (line: string) => void;
}

export interface ReplicaReport {
  id: string;
  node: string;
  /** "start" (the first replica), or "scale-up". */
  added: "start" | "scale-up";
  /** From the change that asked for it (gateway start, or the scale request) to serving in the gateway. */
  time_to_ready_ms: number;
  served: number;
  /** Left during the scale-down. */
  removed: boolean;
}

export interface FleetBenchReport {
  scenario: "fleet";
  agents: number;
  gpus_per_node: number;
  clients: number;
  startup_ms: number;
  replicas: ReplicaReport[];
  /** Scale request → all 4 serving; scale request → 1 serving and 1 running on the agents. */
  scale_up_ms: number;
  scale_down_ms: number;
  requests: number;
  ok: number;
  errors: number;
  non200: number;
  broken: number;
  first_failures: string[];
}

interface EndpointRow {
  id: string;
  node: string | null;
  ready: boolean;
  draining: boolean;
}

async function servingEndpoints(admin: string): Promise<EndpointRow[]> {
  const rows = ((await (await fetch(`${admin}/admin/v1/endpoints`)).json()) as { endpoints: EndpointRow[] }).endpoints;
  return rows.filter((e) => e.ready && !e.draining);
}

async function agentReplicas(agents: readonly LlmgwChild[]): Promise<number> {
  let n = 0;
  for (const a of agents) {
    const s = (await (await fetch(`${a.urls.agent}/v1/state`, { headers: { authorization: `Bearer ${AGENT_TOKEN}` } })).json()) as { replicas: unknown[] };
    n += s.replicas.length;
  }
  return n;
}

/** Poll until `done` (checked every SAMPLE_MS), noting when each endpoint is first seen serving; returns the ms it took. */
async function watch(
  admin: string,
  since: number,
  firstServing: Map<string, { node: string; at: number }>,
  done: (serving: EndpointRow[]) => Promise<boolean>,
  timeoutMs: number,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const serving = await servingEndpoints(admin);
    for (const e of serving) if (!firstServing.has(e.id)) firstServing.set(e.id, { node: e.node ?? "?", at: Date.now() });
    if (await done(serving)) return Date.now() - since;
    if (Date.now() > deadline) throw new Error(`bench fleet: timed out after ${timeoutMs} ms (serving: ${serving.map((e) => e.id).join(", ") || "none"})`);
    await Bun.sleep(SAMPLE_MS);
  }
}

async function scale(admin: string, replicas: number): Promise<void> {
  const res = await fetch(`${admin}/admin/v1/fleet/models/${MODEL}`, {
    method: "PATCH",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ replicas }),
  });
  if (!res.ok) throw new Error(`bench fleet: scale to ${replicas}: HTTP ${res.status} ${await res.text()}`);
}

export async function runFleetBench(o: FleetBenchOptions): Promise<FleetBenchReport> {
  const log = o.log ?? (() => {});
  const dir = mkdtempSync(join(tmpdir(), "llmgw-bench-fleet-"));
  const children: LlmgwChild[] = [];
  try {
    const agents = await Promise.all(
      NODES.map((node, i) => {
        const nvidiaSmi = writeSimNvidiaSmi(join(dir, node, "bin"), { ...SIM_H100, count: o.gpusPerNode, uuidTag: `b${i}` });
        const args = [
          "agent",
          "--listen",
          "127.0.0.1:0",
          "--token",
          AGENT_TOKEN,
          "--state-dir",
          join(dir, node, "state"),
          "--nvidia-smi",
          nvidiaSmi,
          "--sysfs-root",
          join(dir, node, "no-infiniband"),
          "--stop-grace-ms",
          "2000",
        ];
        return spawnLlmgw(args, { timeoutMs: 20_000 });
      }),
    );
    children.push(...agents);
    const config = {
      data_dir: join(dir, "data"),
      health: { poll_interval_ms: 100 },
      nodes: agents.map((a, i) => ({ name: NODES[i], url: a.urls.agent, token: AGENT_TOKEN })),
      fleet: {
        admin_token: ADMIN_TOKEN,
        agent_poll_interval_ms: 200,
        node_not_ready_after_ms: 2_000,
        reconcile_interval_ms: 200,
        models: [{ name: MODEL, engine: "sim", replicas: 1, startup_ms: o.startupMs }],
      },
    };
    const gatewayStartedAt = Date.now();
    const gw = await spawnLlmgw(["serve", "--config", writeGatewayConfig(config), "--log-level", "info"], { waitFor: 2, timeoutMs: 20_000 });
    children.push(gw);
    const admin = gw.urls.admin!;
    const firstServing = new Map<string, { node: string; at: number }>();
    log("1 replica: placing");
    await watch(admin, gatewayStartedAt, firstServing, async (s) => s.length === 1, 60_000);
    const initial = new Set(firstServing.keys());

    const load = startCheckedLoad({ url: `${gw.urls.api}/v1/chat/completions`, clients: o.clients, model: MODEL, maxTokens: o.maxTokens });
    let up: number;
    let down: number;
    let scaleUpAt: number;
    const before = new Set<string>();
    try {
      log(`1 replica under ${o.clients} streams for ${o.holdMs} ms`);
      await Bun.sleep(o.holdMs);
      log("scaling 1 → 4");
      scaleUpAt = Date.now();
      await scale(admin, 4);
      up = await watch(admin, scaleUpAt, firstServing, async (s) => s.length === 4, 120_000);
      log(`4 replicas serving after ${up} ms; holding ${o.holdMs} ms`);
      await Bun.sleep(o.holdMs);
      for (const id of (await servingEndpoints(admin)).map((e) => e.id)) before.add(id);
      log("scaling 4 → 1");
      const scaleDownAt = Date.now();
      await scale(admin, 1);
      down = await watch(admin, scaleDownAt, firstServing, async (s) => s.length === 1 && (await agentReplicas(agents)) === 1, 120_000);
      log(`1 replica left after ${down} ms; holding ${o.holdMs} ms`);
      await Bun.sleep(o.holdMs);
    } finally {
      await load.stop();
    }
    const report = load.report();
    const remaining = new Set((await servingEndpoints(admin)).map((e) => e.id));
    const replicas: ReplicaReport[] = [...firstServing].map(([id, seen]) => {
      const atStart = initial.has(id);
      return {
        id,
        node: seen.node,
        added: atStart ? "start" : "scale-up",
        time_to_ready_ms: seen.at - (atStart ? gatewayStartedAt : scaleUpAt),
        served: report.byEndpoint[id] ?? 0,
        removed: before.has(id) && !remaining.has(id),
      };
    });
    return {
      scenario: "fleet",
      agents: agents.length,
      gpus_per_node: o.gpusPerNode,
      clients: o.clients,
      startup_ms: o.startupMs,
      replicas,
      scale_up_ms: up,
      scale_down_ms: down,
      requests: report.requests,
      ok: report.ok,
      errors: report.non200 + report.broken,
      non200: report.non200,
      broken: report.broken,
      first_failures: report.firstFailures,
    };
  } finally {
    // The gateway first (it stops nothing on the agents); each agent then stops its engines.
    for (const c of [...children].reverse()) await c.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const USAGE = `usage: llmgw bench fleet [--clients N] [--hold-ms MS] [--startup-ms MS] [--max-tokens N]
                         [--gpus-per-node N] [--json]

Two node agents on simulated H100s (sim-engines as engines) and a gateway
with a fleet and no static endpoint. A model is scaled 1 → 4 → 1 through the
management API under closed-loop streaming load. Prints each replica's time
to ready (placed → serving in the gateway), the requests it served, the
scale-up and scale-down times, and errors: non-200 answers and streams
without [DONE] or with an error event (target: 0).

flags:
  --clients N        concurrent streaming clients (default 16)
  --hold-ms MS       time at 1, 4 and again 1 replica (default 5000)
  --startup-ms MS    simulated weight loading of each replica (default 1000)
  --max-tokens N     tokens per streamed answer (default 32; 20 ms each)
  --gpus-per-node N  simulated GPUs per node (default 2; 4 replicas need 4)
  --json             one JSON object instead of the table`;

export const fleetScenario: BenchScenario = {
  name: "fleet",
  summary: "a fleet model scaled 1 → 4 → 1 under streaming load: time to ready, requests per replica, errors",
  usage: USAGE,
  options: {
    clients: { type: "string" },
    "hold-ms": { type: "string" },
    "startup-ms": { type: "string" },
    "max-tokens": { type: "string" },
    "gpus-per-node": { type: "string" },
  },
  async run(args) {
    const json = boolFlag(args, "json");
    const r = await runFleetBench({
      clients: numberFlag(args, "clients", 16, { min: 1, max: 200, integer: true }),
      holdMs: numberFlag(args, "hold-ms", 5_000, { min: 0, max: 600_000, integer: true }),
      startupMs: numberFlag(args, "startup-ms", 1_000, { min: 0, max: 600_000, integer: true }),
      maxTokens: numberFlag(args, "max-tokens", 32, { min: 1, max: 4096, integer: true }),
      gpusPerNode: numberFlag(args, "gpus-per-node", 2, { min: 2, max: 10, integer: true }),
      log: json ? undefined : (l) => console.error(l),
    });
    if (json) {
      console.log(JSON.stringify(r));
      return 0;
    }
    console.log(
      formatTable({
        title: `llmgw bench fleet — 2 agents × ${r.gpus_per_node} simulated H100, ${r.clients} streaming clients, replicas load for ${r.startup_ms} ms`,
        columns: ["replica", "node", "added", "time to ready ms", "requests served", "removed at 4 → 1"],
        rows: r.replicas.map((x) => [x.id, x.node, x.added, x.time_to_ready_ms, x.served, x.removed ? "yes" : "no"]),
      }),
    );
    console.log(`\nscale 1 → 4: all serving after ${r.scale_up_ms} ms; 4 → 1: done after ${r.scale_down_ms} ms`);
    console.log(`requests ${r.requests}, ok ${r.ok}, errors ${r.errors} (non-200 ${r.non200}, broken streams ${r.broken}; target 0)`);
    for (const f of r.first_failures) console.log(`  ${f}`);
    return r.errors === 0 ? 0 : 1;
  },
};
