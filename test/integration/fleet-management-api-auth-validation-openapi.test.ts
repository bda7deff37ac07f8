/**
 * Scenario: the management API served in process on port 0 over a
 * FleetManager with two fake agents. Writes without the admin token (or
 * with a wrong one) are 401 and change nothing; malformed changes are 422
 * naming the field; desired models are created, scaled and removed; agents
 * register with the shared token (a configured node's name is refused); the
 * OpenAPI document lists every route with its responses.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setLogLevel } from "../../src/shared/logger.ts";
import { agentGpus } from "../fixtures/fleet/gpus.ts";
import { type FakeAgent, startFakeAgent } from "../helpers/fake-agent.ts";
import { ADMIN_TOKEN, documentedRoutes, FLEET_API_ROUTES, REGISTRATION_TOKEN, serveFleetApi, startFleet, type TestFleet } from "../helpers/fleet.ts";
import { waitUntil } from "../helpers/processes.ts";

const tmp = mkdtempSync(join(tmpdir(), "fleet-api-"));
let a: FakeAgent;
let b: FakeAgent;
let fleet: TestFleet;
let api: { url: string; stop(): Promise<void> };

async function call(
  method: string,
  path: string,
  body?: unknown,
  token: string | null = ADMIN_TOKEN,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${api.url}/admin/v1/fleet${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

const err = (r: { json: Record<string, unknown> }) => r.json.error as { message: string; code: string; param: string | null; type: string };

beforeAll(async () => {
  setLogLevel("error");
  a = startFakeAgent("node-a", agentGpus("h100", 2, "a"));
  b = startFakeAgent("node-b", agentGpus("h100-mig", 2, "b"));
  fleet = await startFleet({
    data_dir: join(tmp, "data"),
    nodes: [
      { name: "node-a", url: a.url, token: a.token },
      { name: "node-b", url: b.url, token: b.token },
    ],
    fleet: {
      agent_poll_interval_ms: 100,
      node_not_ready_after_ms: 1_000,
      reconcile_interval_ms: 100,
      models: [{ name: "cfg-model", engine: "vllm", replicas: 1 }],
    },
  });
  api = serveFleetApi(fleet.manager);
  await waitUntil(() => fleet.sink.serving().length === 1, { what: "cfg-model in rotation" });
});

afterAll(async () => {
  await api.stop();
  await fleet.stop();
  await Promise.all([a.stop(), b.stop()]);
  rmSync(tmp, { recursive: true, force: true });
  setLogLevel("info");
});

describe("management API", () => {
  test("reads need no token; nodes show each unhealthy GPU and why", async () => {
    const r = await call("GET", "/nodes", undefined, null);
    expect(r.status).toBe(200);
    const nodes = r.json.nodes as { name: string; state: string; gpus: { index: number; healthy: boolean; faults: string[] }[] }[];
    expect(nodes.map((n) => [n.name, n.state])).toEqual([
      ["node-a", "Ready"],
      ["node-b", "Ready"],
    ]);
    expect(nodes[1]!.gpus.map((g) => [g.index, g.healthy, g.faults])).toEqual([
      [0, false, ["MIG mode is enabled (slices are not scheduled)"]],
      [1, false, ["MIG mode is enabled (slices are not scheduled)"]],
    ]);
    expect((await call("GET", "/gpus", undefined, null)).json.gpus).toHaveLength(4);
    expect((await call("GET", "/nodes/nope", undefined, null)).status).toBe(404);
  });

  test("a write without the admin token, or with a wrong one, is 401 and changes nothing; a wrong token is refused on reads too", async () => {
    for (const token of [null, "wrong-token-0000000000"]) {
      const scale = await call("PATCH", "/models/cfg-model", { replicas: 2 }, token);
      expect(scale.status).toBe(401);
      expect(err(scale)).toMatchObject({ code: "UNAUTHORIZED", type: "authentication_error" });
      expect((await call("POST", "/nodes/node-a/cordon", {}, token)).status).toBe(401);
      expect((await call("POST", "/nodes/node-a/drain", { grace_ms: -5 }, token)).status).toBe(401); // before validation
      expect((await call("PUT", "/models/x", { name: "x", engine: "sim", replicas: 1 }, token)).status).toBe(401);
    }
    expect((await call("GET", "/nodes", undefined, "wrong-token-0000000000")).status).toBe(401);
    expect(fleet.manager.state.models.get("cfg-model")!.spec.replicas).toBe(1);
    expect(fleet.manager.state.models.has("x")).toBe(false);
    expect(fleet.manager.state.cordons.size).toBe(0);
    expect(await fleet.store.cordons.list()).toEqual([]);
  });

  test("malformed changes are 422 naming the field, and change nothing", async () => {
    const cases: [string, string, unknown, string | null, string][] = [
      ["PATCH", "/models/cfg-model", { replicas: -1 }, "replicas", "replicas: Too small"],
      ["PATCH", "/models/cfg-model", { replicas: 2, colour: "red" }, null, 'Unrecognized key: "colour"'],
      ["PUT", "/models/new", { name: "new", engine: "tgi", replicas: 1 }, "engine", "engine: Invalid option"],
      ["PUT", "/models/new", { name: "other", engine: "sim", replicas: 1 }, "name", "name: expected 'new' (the model in the path)"],
      ["PUT", "/models/new", { name: "new", engine: "vllm", replicas: 1, startup_ms: 10 }, "startup_ms", "startup_ms: applies to engine sim only"],
      ["POST", "/nodes/node-a/drain", { grace_ms: "soon" }, "grace_ms", "grace_ms: Invalid input"],
    ];
    for (const [method, path, body, param, message] of cases) {
      const r = await call(method, path, body);
      expect({ path, status: r.status }).toEqual({ path, status: 422 });
      expect(err(r)).toMatchObject({ code: "VALIDATION_FAILED", type: "invalid_request_error", param });
      expect(err(r).message).toStartWith(message);
    }
    const bad = await call("PATCH", "/models/cfg-model", "{not json");
    expect(bad.status).toBe(400);
    expect(err(bad).code).toBe("INVALID_JSON");
    expect(fleet.manager.state.models.get("cfg-model")!.spec.replicas).toBe(1);
    expect(fleet.manager.state.models.has("new")).toBe(false);
    expect(fleet.manager.state.drains.size).toBe(0);
  });

  test("desired models: create (201), replace (200), scale, explain, remove", async () => {
    const created = await call("PUT", `/models/${encodeURIComponent("org/sim-model")}`, { name: "org/sim-model", engine: "sim", replicas: 1 });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ name: "org/sim-model", source: "api", desired: 1 });
    expect(
      (await call("PUT", `/models/${encodeURIComponent("org/sim-model")}`, { name: "org/sim-model", engine: "sim", replicas: 1, pool: "batch" })).status,
    ).toBe(200);
    await waitUntil(() => fleet.sink.serving().length === 2, { what: "sim model in rotation" });
    const scaled = await call("PATCH", "/models/cfg-model", { replicas: 2 });
    expect(scaled.json).toMatchObject({ name: "cfg-model", desired: 2, source: "config" });
    // node-a has no GPU left and node-b's are MIG: explain says so for every candidate.
    const explain = await call("GET", "/models/cfg-model/placement", undefined, null);
    expect(explain.json).toMatchObject({ model: "cfg-model", requested: 1, placed: 0 });
    const candidates = explain.json.candidates as { node: string; verdict: string; reasons: { code: string }[] }[];
    expect(candidates.map((c) => [c.node, c.verdict, c.reasons.map((r) => r.code)])).toEqual([
      ["node-a", "rejected", ["too-few-free-gpus"]],
      ["node-b", "rejected", ["gpu-unhealthy"]],
    ]);
    expect((await call("GET", "/models/unknown/placement", undefined, null)).status).toBe(404);
    expect((await call("DELETE", `/models/${encodeURIComponent("org/sim-model")}`)).json).toEqual({ model: "org/sim-model", deleted: true });
    expect((await fleet.store.models.list()).map((m) => [m.spec.name, m.spec.replicas])).toEqual([["cfg-model", 2]]);
    await waitUntil(() => fleet.sink.serving().every((e) => e.models[0] === "cfg-model"), { what: "removed model out of rotation" });
  });

  test("cordon, drain progress, uncordon cancels a running drain", async () => {
    const cordoned = await call("POST", "/nodes/node-b/cordon", { reason: "firmware" });
    expect(cordoned.json).toMatchObject({ name: "node-b", cordoned: true, cordon_reason: "firmware" });
    const drain = await call("POST", "/nodes/node-a/drain", { grace_ms: 60_000 });
    expect(drain.status).toBe(202);
    expect(drain.json).toMatchObject({ node: "node-a", state: "running", grace_ms: 60_000 });
    const progress = await waitUntil(
      async () => {
        const p = await call("GET", "/nodes/node-a/drain", undefined, null);
        return (p.json.waiting_for as string[]).length > 0 ? p.json : null;
      },
      { what: "drain progress" },
    );
    // Nowhere to place a replacement: the drain says so.
    expect((progress!.waiting_for as string[]).join("\n")).toContain("no place for it");
    const un = await call("POST", "/nodes/node-a/uncordon");
    expect(un.json).toMatchObject({ cancelled_drain: true, node: { name: "node-a", cordoned: false } });
    expect((await call("GET", "/nodes/node-a/drain", undefined, null)).json).toMatchObject({ state: "cancelled", waiting_for: [] });
    expect((await call("POST", "/nodes/nope/cordon")).status).toBe(404);
    await call("POST", "/nodes/node-b/uncordon");
  });

  test("agents register with the shared token; a configured name and a wrong token are refused", async () => {
    const reg = { node: "node-c", url: "http://127.0.0.1:1", token: "t" };
    expect((await call("POST", "/register", reg, "wrong")).status).toBe(401);
    expect((await call("POST", "/register", reg, ADMIN_TOKEN)).status).toBe(401);
    const taken = await call("POST", "/register", { ...reg, node: "node-a" }, REGISTRATION_TOKEN);
    expect(taken.status).toBe(409);
    expect(err(taken).code).toBe("CONFLICT");
    expect((await call("POST", "/register", { ...reg, url: "not a url" }, REGISTRATION_TOKEN)).status).toBe(422);
    const ok = await call("POST", "/register", reg, REGISTRATION_TOKEN);
    expect(ok.json).toEqual({ node: "node-c", accepted: true, reregister_interval_ms: 500 });
    const nodes = (await call("GET", "/nodes", undefined, null)).json.nodes as { name: string; source: string; url: string }[];
    expect(nodes.find((n) => n.name === "node-c")).toMatchObject({ source: "registered", url: "http://127.0.0.1:1" });
    expect((await fleet.store.nodes.list()).map((n) => n.name)).toEqual(["node-c"]);
    expect(JSON.stringify(nodes)).not.toContain(a.token); // agent tokens are never shown
  });

  test("the OpenAPI document lists every route with its responses", async () => {
    const routes = await documentedRoutes(`${api.url}/openapi/json`);
    expect(routes.filter((r) => r.includes("/admin/v1/fleet"))).toEqual([...FLEET_API_ROUTES].sort());
  });
});
