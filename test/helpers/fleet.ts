/**
 * Fleet test kit: real `llmgw agent` processes with a fake nvidia-smi built
 * from the shared H200/H100 captures (sim-engines as their engines), and a
 * FleetManager in process, fed by an in-process AgentPoller, handing
 * replicas to a RecordingSink instead of a gateway.
 */

import { expect } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { openapi } from "@elysiajs/openapi";
import { Elysia } from "elysia";
import { z } from "zod";
import { buildConfig } from "../../src/config/load.ts";
import type { Config } from "../../src/config/types.ts";
import type { EndpointSink, ManagedEndpoint } from "../../src/control/endpoint-sink.ts";
import { fleetApi } from "../../src/control/fleet-api.ts";
import { FleetManager } from "../../src/control/fleet-manager.ts";
import { SqliteFleetStore } from "../../src/control/sqlite-store.ts";
import { AgentPoller } from "../../src/polling/agent-poller.ts";
import { capturedGpuRows, type GpuRow } from "../fixtures/agent/captures.ts";
import { unpackTtar, writeFakeNvidiaSmi } from "../fixtures/agent/fake-tools.ts";
import { sharedFixture } from "./fixtures.ts";
import { type Started, startLlmgw } from "./processes.ts";

export const AGENT_TOKEN = "fleet-agent-token";

const CAPTURES = {
  h200: "nvidia-smi-capture__linux-x86_64__nvidia-h200__590.48.01.txt",
  h100: "nvidia-smi-capture__linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt",
} as const;

/** `count` GPUs of a captured card, with distinct indices and UUIDs. */
export function capturedGpus(card: keyof typeof CAPTURES, count: number, uuidTag: string): GpuRow[] {
  const row = capturedGpuRows(sharedFixture(CAPTURES[card]), "idle")[0]!;
  return Array.from({ length: count }, (_, i) => ({
    ...row,
    index: String(i),
    uuid: `GPU-${uuidTag}${String(i).padStart(2, "0")}-0000-0000-0000-000000000000`,
  }));
}

export interface TestAgent {
  name: string;
  dir: string;
  args: string[];
  child: Started;
  url: string;
  /** Start the agent again on the same state directory and port. */
  restart(): Promise<void>;
}

/** What the node's fake tools show beyond its GPUs. */
export interface FakeNodeTools {
  /** nvidia-smi query fields this driver does not know (`utilization.gpu`: an old driver, no utilisation). */
  unknownNvidiaSmiFields?: string[];
  /** InfiniBand adapters in sysfs (the shared procfs fixture's); none by default. */
  infiniband?: boolean;
}

/** Start `llmgw agent` for node `name` over `gpus`, its state and fake tools under `dir`. */
export async function startAgent(name: string, dir: string, gpus: GpuRow[], extraArgs: string[] = [], tools: FakeNodeTools = {}): Promise<TestAgent> {
  mkdirSync(dir, { recursive: true });
  const nvidiaSmi = writeFakeNvidiaSmi(join(dir, "bin"), {
    gpus,
    apps: [],
    ...(tools.unknownNvidiaSmiFields ? { unknownFields: tools.unknownNvidiaSmiFields } : {}),
  });
  const sysfs = join(dir, tools.infiniband ? "infiniband" : "no-infiniband");
  if (tools.infiniband) unpackTtar(sharedFixture("sysfs-class-infiniband__procfs-fixtures-excerpt.ttar"), sysfs, "fixtures/sys/class/infiniband");
  const args = [
    "agent",
    "--listen",
    "127.0.0.1:0",
    "--token",
    AGENT_TOKEN,
    "--state-dir",
    join(dir, "state"),
    "--nvidia-smi",
    nvidiaSmi,
    "--sysfs-root",
    sysfs,
    "--stop-grace-ms",
    "2000",
    ...extraArgs,
  ];
  const child = await startLlmgw(args, { timeoutMs: 20_000 });
  const agent: TestAgent = {
    name,
    dir,
    args,
    child,
    url: child.urls.agent!,
    async restart() {
      // The same port: the control plane knows the agent by its URL.
      const port = new URL(agent.url).port;
      agent.child = await startLlmgw(
        args.map((a) => (a === "127.0.0.1:0" ? `127.0.0.1:${port}` : a)),
        { timeoutMs: 20_000 },
      );
      agent.url = agent.child.urls.agent!;
    },
  };
  return agent;
}

/** Stop every replica an agent runs (DELETE through its API): engines that outlive their agent must not outlive the test. */
export async function deleteAllReplicas(agent: TestAgent): Promise<void> {
  const headers = { authorization: `Bearer ${AGENT_TOKEN}` };
  const res = await fetch(`${agent.url}/v1/state`, { headers }).catch(() => undefined);
  if (!res?.ok) return;
  const state = (await res.json()) as { replicas: { id: string }[] };
  await Promise.all(state.replicas.map((r) => fetch(`${agent.url}/v1/replicas/${encodeURIComponent(r.id)}`, { method: "DELETE", headers })));
}

export type SinkEvent = { kind: "add"; endpoint: ManagedEndpoint } | { kind: "draining"; id: string; draining: boolean } | { kind: "remove"; id: string };

/** An EndpointSink that records every call; tests set in-flight counts. */
export class RecordingSink implements EndpointSink {
  readonly events: SinkEvent[] = [];
  readonly endpoints = new Map<string, ManagedEndpoint & { draining: boolean }>();
  readonly inflights = new Map<string, number>();

  addEndpoint(e: ManagedEndpoint): void {
    this.events.push({ kind: "add", endpoint: e });
    this.endpoints.set(e.id, { ...e, draining: this.endpoints.get(e.id)?.draining ?? false });
  }
  setDraining(id: string, draining: boolean): void {
    this.events.push({ kind: "draining", id, draining });
    const e = this.endpoints.get(id);
    if (e) e.draining = draining;
  }
  inflight(id: string): number {
    return this.inflights.get(id) ?? 0;
  }
  removeEndpoint(id: string): void {
    this.events.push({ kind: "remove", id });
    this.endpoints.delete(id);
  }
  /** Endpoints in rotation (added, not draining). */
  serving(): (ManagedEndpoint & { draining: boolean })[] {
    return [...this.endpoints.values()].filter((e) => !e.draining);
  }
}

export interface TestFleet {
  config: Config;
  manager: FleetManager;
  poller: AgentPoller;
  store: SqliteFleetStore;
  sink: RecordingSink;
  /** Stop planning and polling, close the store (what a SIGTERM does; nothing running is stopped). */
  stop(): Promise<void>;
}

/** A FleetManager over `raw` config (validated like llmgw.yaml), polling agents in process. */
export async function startFleet(raw: Record<string, unknown>, sink = new RecordingSink()): Promise<TestFleet> {
  const config = buildConfig(raw, {}, "test");
  const store = new SqliteFleetStore(config.dataDir);
  let manager: FleetManager | undefined;
  const poller = new AgentPoller(
    { intervalMs: config.fleet.agentPollIntervalMs, timeoutMs: config.fleet.agentPollTimeoutMs, staleAfterMs: 5_000 },
    (node, snap) => manager?.onAgentSnapshot(node, snap),
  );
  manager = await FleetManager.open({ config, store, sink, pollAgents: (agents) => poller.setTargets(agents) });
  manager.start();
  poller.start();
  return {
    config,
    manager,
    poller,
    store,
    sink,
    async stop() {
      await poller.stop();
      await manager!.stop();
      await store.close();
    },
  };
}

export const ADMIN_TOKEN = "fleet-admin-token-0123456789";
export const REGISTRATION_TOKEN = "fleet-registration-token-0123";

/** The management API (with its OpenAPI document) on 127.0.0.1, port 0, as the admin listener would mount it. */
export function serveFleetApi(manager: FleetManager, opts: { adminToken?: string; registrationToken?: string } = {}): { url: string; stop(): Promise<void> } {
  const app = new Elysia()
    .use(openapi({ documentation: { info: { title: "llmgw fleet API (test)", version: "0" } }, mapJsonSchema: { zod: z.toJSONSchema } }))
    .use(
      fleetApi(manager, {
        adminToken: opts.adminToken ?? ADMIN_TOKEN,
        registrationToken: opts.registrationToken ?? REGISTRATION_TOKEN,
        registrationIntervalMs: 500,
      }),
    )
    .listen({ hostname: "127.0.0.1", port: 0 });
  return {
    url: `http://127.0.0.1:${app.server!.port}`,
    async stop() {
      await app.stop(true);
    },
  };
}

/** Every route of the management API, as an OpenAPI document lists it. */
export const FLEET_API_ROUTES = [
  "GET /admin/v1/fleet/nodes",
  "GET /admin/v1/fleet/nodes/{node}",
  "GET /admin/v1/fleet/gpus",
  "GET /admin/v1/fleet/replicas",
  "GET /admin/v1/fleet/models",
  "GET /admin/v1/fleet/models/{model}/placement",
  "GET /admin/v1/fleet/autoscale",
  "DELETE /admin/v1/fleet/models/{model}/pin",
  "PUT /admin/v1/fleet/models/{model}",
  "PATCH /admin/v1/fleet/models/{model}",
  "DELETE /admin/v1/fleet/models/{model}",
  "POST /admin/v1/fleet/nodes/{node}/cordon",
  "POST /admin/v1/fleet/nodes/{node}/uncordon",
  "POST /admin/v1/fleet/nodes/{node}/drain",
  "GET /admin/v1/fleet/nodes/{node}/drain",
  "POST /admin/v1/fleet/nodes/{node}/rebind",
  "POST /admin/v1/fleet/register",
] as const;

/** The routes (`METHOD /path`, sorted) of the OpenAPI document at `url`, after checking it is OpenAPI 3 and every route has a summary and responses. */
export async function documentedRoutes(url: string): Promise<string[]> {
  const doc = (await (await fetch(url)).json()) as {
    openapi: string;
    paths: Record<string, Record<string, { summary?: string; responses?: Record<string, unknown> }>>;
  };
  expect(doc.openapi).toMatch(/^3\./);
  const routes: string[] = [];
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const route = `${method.toUpperCase()} ${path}`;
      expect({ route, summary: typeof op.summary, responses: Object.keys(op.responses ?? {}).length > 0 }).toEqual({
        route,
        summary: "string",
        responses: true,
      });
      routes.push(route);
    }
  }
  return routes.sort();
}
