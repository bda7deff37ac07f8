/**
 * `llmgw demo --fleet` (`npm start -- --fleet`): the fleet manager without
 * GPUs. Two `llmgw agent --sim-gpus` node agents (simulated H100s answered by
 * a stand-in nvidia-smi) and a gateway on config/demo-fleet.yaml whose fleet
 * places sim-engine replicas on them; the banner comes once the replicas
 * serve, with the dashboard and the `llmgw ctl` lines to try. Ctrl-C stops
 * the gateway, then the agents, which stop their engines. Its state lives in
 * a temporary directory removed at the end.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { endpointStates } from "../admin/admin-listener.ts";
import { DEFAULT_ADMIN_LISTEN } from "../config/defaults.ts";
import { loadConfigFile } from "../config/load.ts";
import type { Config } from "../config/types.ts";
import { type LlmgwChild, REPO_ROOT, spawnLlmgw } from "../shared/llmgw-child.ts";
import type { Logger } from "../shared/logger.ts";
import { shutdownSignal } from "../shared/signals.ts";
import { applyListenFlags, metricsLine } from "./demo-listen-flags.ts";
import { ensureListenersFree, type RunningGateway, startGateway } from "./start-gateway.ts";

const DEMO_FLEET_CONFIG = join(REPO_ROOT, "config", "demo-fleet.yaml");
export const DEMO_FLEET_NODES = ["node-1", "node-2"] as const;
/** Simulated GPUs per node: room for a drain's replacements and a scale-up beside the two replicas. */
export const DEMO_SIM_GPUS = 4;
const SERVING_TIMEOUT_MS = 90_000;
/** Where `llmgw ctl` looks without --gateway or LLMGW_GATEWAY. */
const CTL_DEFAULT_GATEWAY = `http://${DEFAULT_ADMIN_LISTEN}`;

interface FleetDemoOptions {
  listen: string | undefined;
  adminListen: string | undefined;
  metricsListen: string | undefined;
  log: Logger;
}

function demoConfig(o: FleetDemoOptions, dataDir: string, adminToken: string, nodes: { name: string; url: string; token: string }[]): Config {
  return loadConfigFile(DEMO_FLEET_CONFIG, (raw, origins) => {
    raw.data_dir = dataDir;
    raw.nodes = nodes;
    raw.fleet = { ...(raw.fleet as Record<string, unknown>), admin_token: adminToken };
    applyListenFlags(raw, origins, o);
  });
}

function startAgent(name: string, dir: string, token: string): Promise<LlmgwChild> {
  const args = ["agent", "--listen", "127.0.0.1:0", "--token", token, "--state-dir", join(dir, name), "--sim-gpus", String(DEMO_SIM_GPUS)];
  // No InfiniBand on simulated nodes, whatever this machine has; engines get 2 s to stop.
  args.push("--sysfs-root", join(dir, "no-infiniband"), "--stop-grace-ms", "2000");
  // "info": the listening line carries the port; the output is kept, not echoed.
  return spawnLlmgw(args, { timeoutMs: 20_000, env: { LLMGW_LOG_LEVEL: "info" } });
}

/** Fleet replicas in rotation (ready, not draining). */
function servingReplicas(gw: RunningGateway): number {
  return endpointStates(gw.ctx).filter((e) => e.node !== null && e.ready && !e.draining).length;
}

async function waitServing(gw: RunningGateway, want: number): Promise<void> {
  const deadline = Date.now() + SERVING_TIMEOUT_MS;
  while (servingReplicas(gw) < want) {
    if (Date.now() > deadline)
      throw new Error(`the fleet demo's ${want} replicas did not serve within ${SERVING_TIMEOUT_MS / 1000} s (see: npx llmgw ctl replicas)`);
    await Bun.sleep(200);
  }
}

/** `npx llmgw ctl …` lines with their comments aligned. */
function ctlLines(lines: readonly [string, string][]): string {
  const width = Math.max(...lines.map(([cmd]) => cmd.length));
  return lines.map(([cmd, note]) => `  npx llmgw ctl ${note ? `${cmd.padEnd(width)}   # ${note}` : cmd}`).join("\n");
}

function banner(gw: RunningGateway, config: Config, agents: readonly { name: string; url: string }[]): string {
  const api = gw.urls.api;
  const admin = gw.urls.admin;
  const model = config.fleet.models[0]!;
  const alias = config.models.find((m) => m.name === model.name)?.aliases[0];
  const [first, second] = [agents[0]!.name, agents[1]!.name];
  const exports = [`  export LLMGW_ADMIN_TOKEN=${config.fleet.adminToken}`, ...(admin === CTL_DEFAULT_GATEWAY ? [] : [`  export LLMGW_GATEWAY=${admin}`])];
  return `
llmgw demo --fleet is running: a gateway with the fleet manager, and ${agents.length} node agents
on simulated GPUs (${DEMO_SIM_GPUS} × H100 80GB each, answered by a stand-in nvidia-smi).
${model.replicas} replicas of "${model.name}" are placed and serving.

  OpenAI API     ${api}/v1        (model "${model.name}"${alias ? `, alias "${alias}"` : ""})
  Dashboard      ${admin}/dashboard
  Admin          ${admin}/admin/v1/fleet/nodes   ${admin}/metrics   ${admin}/openapi${metricsLine(gw.urls.metrics)}
  Node agents    ${agents.map((a) => `${a.name} ${a.url}`).join("   ")}

Try it:

  curl -N ${api}/v1/chat/completions -H 'content-type: application/json' \\
    -d '{"model":"${model.name}","stream":true,"messages":[{"role":"user","content":"Hello!"}]}'

The fleet, from another terminal in this directory (changes need the admin token):

${exports.join("\n")}
${ctlLines([
  ["nodes", "nodes, GPUs, cordons"],
  ["replicas", "where each replica runs"],
  [`explain-placement ${model.name}`, "where one more would go, and why"],
  [`scale ${model.name} 3`, "one more replica"],
  [`drain ${first}`, `move its replicas to ${second}, replacement first`],
  [`uncordon ${first}`, "let it take replicas again"],
  [`cordon ${second} --reason "maintenance"`, "no new replicas there; ctl nodes shows why"],
])}

Press Ctrl-C to stop the gateway, the agents and their engines.
`;
}

export async function runFleetDemo(o: FleetDemoOptions): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-demo-fleet-"));
  const agentToken = randomBytes(16).toString("hex");
  const adminToken = `demo-${randomBytes(12).toString("hex")}`;
  const agents: LlmgwChild[] = [];
  let gw: RunningGateway | undefined;
  const stopAll = async () => {
    await gw?.stop();
    // Each agent stops its engines on SIGTERM.
    await Promise.all(agents.map((a) => a.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // The gateway's ports first: a taken one is reported before any agent starts.
    await ensureListenersFree(demoConfig(o, join(dir, "data"), adminToken, []));
    console.error(`starting ${DEMO_FLEET_NODES.length} node agents on simulated GPUs…`);
    agents.push(...(await Promise.all(DEMO_FLEET_NODES.map((name) => startAgent(name, dir, agentToken)))));
    const nodes = DEMO_FLEET_NODES.map((name, i) => ({ name, url: agents[i]!.urls.agent!, token: agentToken }));
    const config = demoConfig(o, join(dir, "data"), adminToken, nodes);
    gw = await startGateway(config, { log: o.log });
    const model = config.fleet.models[0]!;
    console.error(`placing ${model.replicas} replicas of ${model.name} (each loads for ${(model.startupMs ?? 0) / 1000} s)…`);
    await waitServing(gw, model.replicas);
    console.log(banner(gw, config, nodes));
  } catch (err) {
    await stopAll();
    throw err;
  }
  await shutdownSignal();
  console.log("\nstopping the gateway, the node agents and their engines…");
  await stopAll();
  return 0;
}
