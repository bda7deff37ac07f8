/**
 * Scenario (issue 9, "must show"): two real agents — node-a with 2× H200,
 * node-b with 2× H100, each a fake nvidia-smi from the shared captures,
 * launching real sim-engines — and one real `llmgw serve` with a fleet and
 * no static endpoint. A model with 2 replicas is placed one per node, turns
 * Ready and serves through the OpenAI API; the gateway follows each
 * replica's KV-cache events with no configuration (the agents started them
 * publishing and reported where). `llmgw ctl drain node-a` (the real
 * CLI) then moves node-a's replica to node-b while continuous streaming
 * traffic runs: no non-200 answer, no stream without [DONE] or with an error
 * event, and node-a ends with no replica. Then: explain-placement for a model
 * that fits nowhere names every node and its reason, the admin listener's
 * OpenAPI document lists every route, and writes without the token are 401
 * and change nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startCheckedLoad } from "../../src/bench/checked-stream-load.ts";
import { counterValue, type Gateway } from "../helpers/cluster.ts";
import { capturedGpus, documentedRoutes, FLEET_API_ROUTES, startAgent, type TestAgent } from "../helpers/fleet.ts";
import { agentState, ctl, endpointRows, fleetCall, fleetGatewayConfig, serving, startFleetGateway } from "../helpers/fleet-gateway.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const MODEL = "sim-llama";
const tmp = mkdtempSync(join(tmpdir(), "fleet-drain-e2e-"));
let a: TestAgent;
let b: TestAgent;
let gw: Gateway;

beforeAll(async () => {
  [a, b] = await Promise.all([
    startAgent("node-a", join(tmp, "a"), capturedGpus("h200", 2, "aa")),
    startAgent("node-b", join(tmp, "b"), capturedGpus("h100", 2, "bb")),
  ]);
  gw = await startFleetGateway(fleetGatewayConfig(join(tmp, "data"), [a, b], { models: [{ name: MODEL, engine: "sim", replicas: 2 }] }));
});

afterAll(async () => {
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

describe("a fleet-only gateway over two real agents", () => {
  test("2 replicas are placed one per node, turn Ready and serve through the OpenAI API", async () => {
    const eps = await waitUntil(
      async () => {
        const s = await serving(gw, MODEL);
        return s.length === 2 ? s : null;
      },
      { timeoutMs: 40_000, what: "2 replicas in rotation" },
    );
    expect(eps.map((e) => e.node).sort()).toEqual(["node-a", "node-b"]);
    const models = (await (await fetch(`${gw.api}/v1/models`)).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toEqual([MODEL]);
    const served = new Set<string>();
    for (let i = 0; i < 8; i++) {
      const res = await fetch(`${gw.api}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL, max_tokens: 4, messages: [{ role: "user", content: `hello ${i}` }] }),
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { choices: unknown[] }).choices).toHaveLength(1);
      served.add(res.headers.get("x-llmgw-endpoint")!);
    }
    expect([...served].every((id) => eps.some((e) => e.id === id))).toBe(true);
    // A gateway that started with no endpoint has a scrape (not a 503 for ever), and it follows the replicas.
    const metrics = await fetch(`${gw.admin}/metrics`);
    expect(metrics.status).toBe(200);
    const text = await metrics.text();
    for (const e of eps) expect(text).toContain(`llmgw_endpoint_ready{endpoint="${e.id}"} 1`);
    // Each replica's KV-cache events are followed, and what a long prompt leaves in an engine's cache is indexed.
    const kvText = () => fetch(`${gw.admin}/metrics`).then((r) => r.text());
    await waitUntil(
      async () => {
        const t = await kvText();
        return eps.every((e) => t.includes(`llmgw_kv_events_stream_state{endpoint="${e.id}",state="live"} 1`));
      },
      { what: "both replicas' event streams live" },
    );
    const long = await fetch(`${gw.api}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: MODEL,
        max_tokens: 2,
        messages: [
          { role: "system", content: "Answer as the fleet's test assistant. ".repeat(40) },
          { role: "user", content: "hi" },
        ],
      }),
    });
    expect(long.status).toBe(200);
    const holder = long.headers.get("x-llmgw-endpoint")!;
    await waitUntil(async () => counterValue(await kvText(), "llmgw_kv_index_blocks", { endpoint: holder }) > 0, { what: "the prompt's blocks indexed" });
  }, 60_000);

  test("ctl drain node-a moves its replica to node-b under streaming load: no non-200, no truncated stream, node-a empty", async () => {
    const before = await serving(gw, MODEL);
    const original = before.find((e) => e.node === "node-a")!;
    // ~0.5 s streams (sim: 20 ms a token): several are open on the original when it leaves rotation.
    const load = startCheckedLoad({ url: `${gw.api}/v1/chat/completions`, clients: 12, model: MODEL, maxTokens: 24 });
    await waitUntil(() => load.results.length >= 24, { what: "traffic flowing" });
    const drain = await ctl(gw, ["drain", "node-a", "--grace-ms", "60000"]);
    expect({ code: drain.code, err: drain.err }).toEqual({ code: 0, err: "" });
    expect(drain.out).toContain("node-a");
    // Traffic keeps flowing on the two replicas now on node-b.
    const drainedAt = load.results.length;
    await waitUntil(() => load.results.length >= drainedAt + 24, { what: "traffic after the drain" });
    const report = await load.stop();
    console.error(`fleet drain under load: ${JSON.stringify(report)}`);
    expect(report.firstFailures).toEqual([]);
    expect({ non200: report.non200, broken: report.broken }).toEqual({ non200: 0, broken: 0 });
    // Streams open on the original when the drain began finished there, whole.
    const startedAt = ((await fleetCall(gw, "GET", "/nodes/node-a/drain")).json as { started_at: number }).started_at;
    const openAtDrain = load.results.filter((r) => r.endpoint === original.id && r.sentAt < startedAt && r.endedAt > startedAt);
    expect(openAtDrain.length).toBeGreaterThan(0);
    expect(openAtDrain.every((r) => r.ok)).toBe(true);
    const after = await serving(gw, MODEL);
    expect(after.map((e) => e.node)).toEqual(["node-b", "node-b"]);
    const replacement = after.find((e) => !before.some((x) => x.id === e.id))!;
    expect(report.byEndpoint[replacement.id]).toBeGreaterThan(0);
    expect((await endpointRows(gw)).some((e) => e.id === original.id)).toBe(false);
    expect((await agentState(a)).replicas).toEqual([]);
    expect((await agentState(b)).replicas.map((r) => r.id).sort()).toEqual(after.map((e) => e.id).sort());
  }, 90_000);

  test("explain-placement for a model that fits nowhere names every node and its reason", async () => {
    const put = await fleetCall(gw, "PUT", "/models/huge", { name: "huge", engine: "sim", replicas: 1, tensor_parallel: 4 });
    expect(put.status).toBe(201);
    const table = await ctl(gw, ["explain-placement", "huge"]);
    expect(table.code).toBe(0);
    expect(table.out).toContain("huge: 0 of 1 replica(s) can be placed");
    for (const text of ["node-a", "node-b", "cordoned", "too-few-free-gpus"]) expect(table.out).toContain(text);
    const json = await ctl(gw, ["--json", "explain-placement", "huge"]);
    const p = JSON.parse(json.out) as { placed: number; candidates: { node: string; verdict: string; reasons: { code: string }[] }[] };
    expect(p.placed).toBe(0);
    const byNode = Object.fromEntries(
      ["node-a", "node-b"].map((n) => [n, p.candidates.filter((c) => c.node === n).flatMap((c) => c.reasons.map((r) => r.code))]),
    );
    expect(p.candidates.every((c) => c.verdict === "rejected")).toBe(true);
    expect(new Set(byNode["node-a"])).toEqual(new Set(["cordoned", "too-few-free-gpus"]));
    expect(new Set(byNode["node-b"])).toEqual(new Set(["too-few-free-gpus"]));
    expect((await fleetCall(gw, "DELETE", "/models/huge")).status).toBe(200);
  }, 30_000);

  test("the admin listener's OpenAPI document lists every route, each with a summary and responses", async () => {
    const routes = await documentedRoutes(`${gw.admin}/openapi/json`);
    const diagnostics = ["GET /admin/v1/diagnostics/memory", "GET /admin/v1/diagnostics/heap", "POST /admin/v1/diagnostics/gc"];
    // The page's own files (/dashboard/*.js, *.css) are static files, which the OpenAPI plugin leaves out.
    const dashboard = ["GET /dashboard", "GET /admin/v1/dashboard"];
    const keys = ["GET", "POST"].map((m) => `${m} /admin/v1/keys`);
    const key = [
      "GET /admin/v1/keys/{id}",
      "PATCH /admin/v1/keys/{id}",
      "GET /admin/v1/keys/{id}/usage",
      "POST /admin/v1/keys/{id}/revoke",
      "POST /admin/v1/keys/{id}/rotate",
    ];
    expect(routes).toEqual(
      [
        "GET /metrics",
        "GET /healthz",
        "GET /readyz",
        "GET /admin/v1/endpoints",
        "POST /admin/v1/reload",
        ...diagnostics,
        ...dashboard,
        ...keys,
        ...key,
        ...FLEET_API_ROUTES,
      ].sort(),
    );
  });

  test("writes without the admin token (or with a wrong one) are 401 and change nothing", async () => {
    const nodesBefore = (await fleetCall(gw, "GET", "/nodes", undefined, null)).json;
    const modelsBefore = (await fleetCall(gw, "GET", "/models", undefined, null)).json;
    for (const token of [null, "not-the-admin-token-at-all"]) {
      const writes = await Promise.all([
        fleetCall(gw, "POST", "/nodes/node-b/cordon", { reason: "x" }, token),
        fleetCall(gw, "POST", "/nodes/node-a/uncordon", undefined, token),
        fleetCall(gw, "POST", "/nodes/node-b/drain", {}, token),
        fleetCall(gw, "PATCH", `/models/${MODEL}`, { replicas: 5 }, token),
        fleetCall(gw, "PUT", "/models/other", { name: "other", engine: "sim", replicas: 1 }, token),
        fleetCall(gw, "DELETE", `/models/${MODEL}`, undefined, token),
      ]);
      for (const w of writes)
        expect({ status: w.status, code: (w.json.error as { code?: string } | undefined)?.code }).toEqual({ status: 401, code: "UNAUTHORIZED" });
    }
    expect((await fleetCall(gw, "GET", "/models", undefined, null)).json).toEqual(modelsBefore);
    type Nodes = { nodes: { name: string; cordoned: boolean; cordon_reason: string | null; drain: unknown }[] };
    const pick = (v: Record<string, unknown>) =>
      (v as Nodes).nodes.map((n) => ({ name: n.name, cordoned: n.cordoned, reason: n.cordon_reason, drain: n.drain }));
    expect(pick((await fleetCall(gw, "GET", "/nodes", undefined, null)).json)).toEqual(pick(nodesBefore));
  });
});
