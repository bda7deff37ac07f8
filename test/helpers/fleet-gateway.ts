/**
 * A real `llmgw serve` running the fleet manager over real agents (see
 * fleet.ts for the agents): its config, the management API and the real
 * `llmgw ctl` CLI as a child process.
 */

import type { AgentState } from "../../src/protocol/agent-messages.ts";
import { CLI_PATH, REPO_ROOT } from "../../src/shared/llmgw-child.ts";
import { childEnv } from "../../src/shared/process-env.ts";
import { type Gateway, startGateway } from "./cluster.ts";
import { ADMIN_TOKEN, AGENT_TOKEN, REGISTRATION_TOKEN, type TestAgent } from "./fleet.ts";

export interface EndpointRow {
  id: string;
  node: string | null;
  ready: boolean;
  draining: boolean;
  inflight: number;
  models: string[];
}

/** A fleet-only gateway config (no static endpoint) over `agents`, quick timings for tests. */
export function fleetGatewayConfig(dataDir: string, agents: readonly TestAgent[], fleet: Record<string, unknown>): Record<string, unknown> {
  return {
    data_dir: dataDir,
    health: { poll_interval_ms: 100 },
    nodes: agents.map((a) => ({ name: a.name, url: a.url, token: AGENT_TOKEN })),
    fleet: {
      admin_token: ADMIN_TOKEN,
      registration_token: REGISTRATION_TOKEN,
      agent_poll_interval_ms: 200,
      node_not_ready_after_ms: 1_500,
      reconcile_interval_ms: 200,
      drain_grace_ms: 60_000,
      ...fleet,
    },
  };
}

export function startFleetGateway(config: Record<string, unknown>): Promise<Gateway> {
  return startGateway(config);
}

export async function endpointRows(gw: Gateway): Promise<EndpointRow[]> {
  return ((await (await fetch(`${gw.admin}/admin/v1/endpoints`)).json()) as { endpoints: EndpointRow[] }).endpoints;
}

/** Endpoints the gateway routes new requests to (ready, not draining). */
export async function serving(gw: Gateway, model: string): Promise<EndpointRow[]> {
  return (await endpointRows(gw)).filter((e) => e.ready && !e.draining && e.models.includes(model));
}

export async function agentState(agent: TestAgent): Promise<AgentState> {
  return (await (await fetch(`${agent.url}/v1/state`, { headers: { authorization: `Bearer ${AGENT_TOKEN}` } })).json()) as AgentState;
}

/** A management API call with the admin token (or `token`: null for none). */
export async function fleetCall(
  gw: Gateway,
  method: string,
  path: string,
  body?: unknown,
  token: string | null = ADMIN_TOKEN,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${gw.admin}/admin/v1/fleet${path}`, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/** The real `llmgw ctl` against the gateway's admin listener, as an operator runs it. */
export async function ctl(gw: Gateway, args: string[]): Promise<{ code: number; out: string; err: string }> {
  const proc = Bun.spawn([process.execPath, CLI_PATH, "ctl", "--gateway", gw.admin, "--token", ADMIN_TOKEN, ...args], {
    cwd: REPO_ROOT,
    env: childEnv({ LLMGW_PARENT_PID: String(process.pid), NO_COLOR: "1" }),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, out, err };
}
