/**
 * Scenario: one real agent (2× H100 from the shared captures) launching
 * real sim-engines for a real `llmgw serve` whose fleet declares a base
 * model with two LoRA adapters. The replicas start with LoRA on and no
 * adapter loaded. A request for one adapter waits while the fleet loads it
 * through the agent (PUT /v1/replicas/{id}/adapters/{name} → the engine's
 * /v1/load_lora_adapter), then is served by a replica that lists it; the
 * other adapter stays unloaded; `ctl models` shows where each is; and once
 * no request has used it for fleet.adapter_idle_unload_ms it is unloaded
 * again. An adapter of a replica that was not started with LoRA, or a
 * missing replica, is refused by the agent.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { counterValue, type Gateway } from "../helpers/cluster.ts";
import { AGENT_TOKEN, capturedGpus, startAgent, type TestAgent } from "../helpers/fleet.ts";
import { agentState, ctl, fleetCall, fleetGatewayConfig, serving, startFleetGateway } from "../helpers/fleet-gateway.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const BASE = "sim-llama";
const IDLE_MS = 4_000;
const tmp = mkdtempSync(join(tmpdir(), "fleet-lora-"));
let agent: TestAgent;
let gw: Gateway;

async function listed(url: string): Promise<string[]> {
  const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string; parent: string | null }[] };
  return models.data.filter((m) => m.parent !== null).map((m) => m.id);
}

beforeAll(async () => {
  agent = await startAgent("node-a", join(tmp, "a"), capturedGpus("h100", 2, "aa"));
  gw = await startFleetGateway(
    fleetGatewayConfig(join(tmp, "data"), [agent], {
      adapter_idle_unload_ms: IDLE_MS,
      adapter_load_wait_ms: 20_000,
      models: [
        {
          name: BASE,
          engine: "sim",
          replicas: 2,
          max_loras: 2,
          adapters: [
            { name: "sql", path: "/adapters/sql" },
            { name: "legal", path: "/adapters/legal" },
          ],
        },
      ],
    }),
  );
}, 60_000);

afterAll(async () => {
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

describe("LoRA adapters in a fleet", () => {
  test("replicas start with LoRA on and nothing loaded; a request for a declared adapter is served once the agent loaded it", async () => {
    const eps = await waitUntil(
      async () => {
        const s = await serving(gw, BASE);
        return s.length === 2 ? s : null;
      },
      { timeoutMs: 40_000, what: "2 replicas in rotation" },
    );
    const state = await agentState(agent);
    const urls = state.replicas.map((r) => r.endpoint);
    expect(urls).toHaveLength(2);
    for (const url of urls) expect(await listed(url)).toEqual([]);
    // The gateway knows the adapters from the fleet's declaration.
    const models = (await (await fetch(`${gw.api}/v1/models`)).json()) as { data: { id: string; parent: string | null }[] };
    expect(models.data.map((m) => `${m.id}:${m.parent}`).sort()).toEqual(["legal:sim-llama", "sim-llama:null", "sql:sim-llama"]);

    const started = Date.now();
    const res = await fetch(`${gw.api}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "sql", max_tokens: 4, messages: [{ role: "user", content: "select" }] }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { model: string; choices: unknown[] };
    expect(body.model).toBe("sql");
    console.log(`first request for an unloaded adapter answered after ${Date.now() - started} ms`);
    const servedBy = res.headers.get("x-llmgw-endpoint");
    expect(eps.map((e) => e.id)).toContain(servedBy!);

    // Loaded on exactly one replica (the one that served it), through the agent; legal nowhere.
    const holding = await Promise.all(urls.map(listed));
    expect(holding.filter((l) => l.includes("sql"))).toHaveLength(1);
    expect(holding.flat()).not.toContain("legal");
    const metrics = await gw.metrics();
    expect(counterValue(metrics, "llmgw_fleet_adapter_loads_total", { model: BASE, result: "ok" })).toBe(1);
    expect(metrics).toContain(`llmgw_fleet_adapters_loaded{model="${BASE}"} 1`);

    // Later requests go to the replica that has it, with no new load.
    for (let i = 0; i < 4; i++) {
      const again = await fetch(`${gw.api}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "sql", max_tokens: 2, prompt: `q${i}` }),
      });
      expect(again.status).toBe(200);
      expect(again.headers.get("x-llmgw-endpoint")).toBe(servedBy);
    }

    const status = await fleetCall(gw, "GET", "/models");
    const model = (status.json.models as { name: string; adapters: { name: string; loaded_on: string[] }[] }[]).find((m) => m.name === BASE)!;
    expect(model.adapters.find((a) => a.name === "sql")!.loaded_on).toEqual([servedBy!]);
    expect(model.adapters.find((a) => a.name === "legal")!.loaded_on).toEqual([]);
    const table = await ctl(gw, ["models"]);
    expect(table.code).toBe(0);
    expect(table.out).toContain("1/2 loaded");
    expect(table.out).toMatch(/sql\s+sim-llama\s+\S+/);
    expect(table.out).toMatch(/legal\s+sim-llama\s+not loaded/);
  }, 90_000);

  test("an adapter no request uses is unloaded after the idle window", async () => {
    const urls = (await agentState(agent)).replicas.map((r) => r.endpoint);
    await waitUntil(async () => (await Promise.all(urls.map(listed))).flat().length === 0, { timeoutMs: IDLE_MS + 10_000, what: "sql unloaded" });
    const metrics = await gw.metrics();
    expect(counterValue(metrics, "llmgw_fleet_adapter_unloads_total", { model: BASE, result: "ok" })).toBe(1);
    // Unloaded for good: no request since, so no load back.
    await Bun.sleep(1_000);
    expect(counterValue(await gw.metrics(), "llmgw_fleet_adapter_loads_total", { model: BASE, result: "ok" })).toBe(1);
  }, 30_000);

  test("the agent refuses adapters for a replica without LoRA or one it does not run", async () => {
    const put = (id: string) =>
      fetch(`${agent.url}/v1/replicas/${id}/adapters/sql`, {
        method: "PUT",
        headers: { authorization: `Bearer ${AGENT_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ path: "/a" }),
      });
    const missing = await put("no-such-replica");
    expect(missing.status).toBe(404);
    const bad = await fetch(`${agent.url}/v1/replicas/x/adapters/sql`, {
      method: "PUT",
      headers: { authorization: `Bearer ${AGENT_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({}),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("VALIDATION_FAILED");
  });
});
