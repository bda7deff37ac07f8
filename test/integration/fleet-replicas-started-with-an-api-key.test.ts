/**
 * Scenario: a fleet model with `api_key_env`: the agent starts its sim-engine
 * replica with the key from its own environment (as VLLM_API_KEY, as vLLM
 * reads it), probes it with the key until Ready, and the gateway — holding
 * the same variable — polls it and serves chat through it. The replica
 * refuses a request without the key; the key is in no output and in none of
 * the agent's state files; a model naming a variable the gateway lacks is
 * refused by the management API.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Gateway } from "../helpers/cluster.ts";
import { capturedGpus, deleteAllReplicas, startAgent, type TestAgent } from "../helpers/fleet.ts";
import { fleetCall, fleetGatewayConfig, serving, startFleetGateway } from "../helpers/fleet-gateway.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const KEY_VAR = "LLMGW_TEST_FLEET_ENGINE_KEY";
const KEY = "sk-fleet-engine-5c1e0a93d7";
const tmp = mkdtempSync(join(tmpdir(), "fleet-key-"));
let agent: TestAgent;
let gw: Gateway;

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? filesUnder(p) : [p];
  });
}

beforeAll(async () => {
  // Inherited by the agent and the gateway the test starts: both hold the variable, as an operator sets it on each host.
  process.env[KEY_VAR] = KEY;
  agent = await startAgent("node-a", join(tmp, "a"), capturedGpus("h100", 1, "aa"));
  gw = await startFleetGateway(
    fleetGatewayConfig(join(tmp, "data"), [agent], { models: [{ name: "keyed-sim", engine: "sim", replicas: 1, api_key_env: KEY_VAR }] }),
  );
});

afterAll(async () => {
  delete process.env[KEY_VAR];
  await deleteAllReplicas(agent).catch(() => undefined);
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

describe("fleet replicas started with an API key", () => {
  test("the replica turns Ready and the gateway serves chat through it with the key", async () => {
    const [row] = await waitUntil(
      async () => {
        const s = await serving(gw, "keyed-sim");
        return s.length === 1 ? s : undefined;
      },
      { what: "the keyed replica in rotation", timeoutMs: 60_000 },
    );
    expect(row!.models).toContain("keyed-sim");
    const res = await fetch(`${gw.api}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "keyed-sim", max_tokens: 3, messages: [{ role: "user", content: "hi" }] }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(3);
  });

  test("the engine itself refuses a request without the key", async () => {
    const rows = (await (await fetch(`${gw.admin}/admin/v1/endpoints`)).json()) as { endpoints: { url: string }[] };
    const url = rows.endpoints[0]!.url;
    const bare = await fetch(`${url}/v1/models`);
    expect(bare.status).toBe(401);
    expect((await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } })).status).toBe(200);
  });

  test("the key is in no process output and in none of the agent's files", () => {
    expect(gw.output()).not.toContain(KEY);
    expect(agent.child.output()).not.toContain(KEY);
    const files = filesUnder(join(tmp, "a", "state"));
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) expect(readFileSync(f, "latin1").includes(KEY) ? f : "clean").toBe("clean");
  });

  test("a model naming a variable this gateway lacks is refused, naming it", async () => {
    const r = await fleetCall(gw, "PUT", "/models/unkeyed", { name: "unkeyed", engine: "sim", replicas: 1, api_key_env: "LLMGW_TEST_NOT_SET_ANYWHERE" });
    expect(r.status).toBe(400);
    expect((r.json.error as { code: string }).code).toBe("VALIDATION_FAILED");
    expect(JSON.stringify(r.json)).toContain("environment variable LLMGW_TEST_NOT_SET_ANYWHERE is not set or empty on this gateway");
  });
});
