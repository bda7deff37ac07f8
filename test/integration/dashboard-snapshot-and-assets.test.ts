/**
 * The dashboard's server side with a real gateway in front of a sim-engine
 * with two simulated GPUs (no fleet): the page is served with a policy that
 * allows its own origin only, its assets as they are and nothing else under
 * /dashboard, and the JSON snapshot matches its schema and says what the
 * metrics say — GPUs with absent utilisation as null, pools with their bands,
 * traffic counted.
 */
import { afterAll, expect, test } from "bun:test";
import { DASHBOARD_CSP } from "../../src/admin/dashboard/routes.ts";
import { dashboardSnapshotSchema } from "../../src/admin/dashboard/snapshot.ts";
import { startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

afterAll(stopAll);

test("page, assets and snapshot on the admin listener; absent figures are null", async () => {
  const sim = await startSim(["--model", "m", "--itl-ms", "2", "--gpus", "2", "--dcgm-port", "0"]);
  await sim.configure({ gpus: [{ index: 1, utilization_reported: false }] });
  const gw = await startGateway({ health: { poll_interval_ms: 100 }, endpoints: [{ id: "sim", url: sim.api, dcgm_url: `${sim.dcgm}/metrics` }] }, 1);

  const page = await fetch(`${gw.admin}/dashboard`);
  expect(page.status).toBe(200);
  expect(page.headers.get("content-type")).toStartWith("text/html");
  expect(page.headers.get("content-security-policy")).toBe(DASHBOARD_CSP);
  const html = await page.text();
  // Every resource the page names is on this origin.
  const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
  expect(refs.every((r) => r.startsWith("/dashboard/") || r === "data:,")).toBe(true);
  for (const [name, type] of [
    ["dashboard.js", "text/javascript"],
    ["traffic.js", "text/javascript"],
    ["dashboard.css", "text/css"],
  ] as const) {
    const res = await fetch(`${gw.admin}/dashboard/${name}`);
    expect({ name, status: res.status, type: res.headers.get("content-type")?.split(";")[0] }).toEqual({ name, status: 200, type });
    expect(await res.text()).not.toContain("http://");
  }
  for (const path of ["/dashboard/index.html", "/dashboard/snapshot.ts", "/dashboard/..%2F..%2Fpackage.json", "/dashboard/nope.js"]) {
    expect({ path, status: (await fetch(`${gw.admin}${path}`)).status }).toEqual({ path, status: 404 });
  }

  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${gw.api}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "m", stream: true, max_tokens: 3, messages: [{ role: "user", content: `hi ${i}` }] }),
    });
    await res.text();
  }
  await fetch(`${gw.api}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: "nope", messages: [{ role: "user", content: "x" }] }) }).then(
    (r) => r.text(),
  );

  const snap = await waitUntil(
    async () => {
      const s = dashboardSnapshotSchema.parse(await (await fetch(`${gw.admin}/admin/v1/dashboard`)).json());
      return s.gpus.length === 2 && s.traffic.requests === 4 ? s : null;
    },
    { what: "two GPUs and four requests in the snapshot" },
  );
  expect(snap.fleet).toBe(false);
  expect(snap.nodes).toEqual([]);
  expect(snap.replicas).toEqual([]);
  const byIndex = Object.fromEntries(snap.gpus.map((g) => [g.index, g]));
  expect(byIndex[0]).toMatchObject({ node: "127.0.0.1", class: "h100-80g", healthy: true, faults: [] });
  expect(byIndex[0]!.utilization).toBeGreaterThanOrEqual(0);
  expect(byIndex[1]!.utilization).toBeNull();
  expect(byIndex[1]!.temperature_c).toBeGreaterThan(20);
  // An unknown model is the client's error, not the gateway's.
  expect({ requests: snap.traffic.requests, errors: snap.traffic.errors, ttft: snap.traffic.ttft.count }).toEqual({ requests: 4, errors: 0, ttft: 3 });
  expect(snap.pools).toEqual([
    {
      name: "default",
      saturation: expect.any(Number),
      queue_depth: [
        { band: "interactive", depth: 0 },
        { band: "standard", depth: 0 },
        { band: "batch", depth: 0 },
      ],
    },
  ]);
  expect(snap.endpoints).toEqual([{ id: "sim", node: null, pool: "default", ready: true, draining: false, gpu_faulted: false, inflight: 0 }]);

  // An XID on GPU 1 shows in the next snapshot with its reason.
  await sim.configure({ gpus: [{ index: 1, xid_errors: 79 }] });
  const faulted = await waitUntil(
    async () => {
      const s = dashboardSnapshotSchema.parse(await (await fetch(`${gw.admin}/admin/v1/dashboard`)).json());
      return s.gpus.find((g) => g.index === 1 && !g.healthy);
    },
    { what: "GPU 1 faulted in the snapshot" },
  );
  expect(faulted.faults).toEqual(["xid 79: GPU has fallen off the bus"]);
  await gw.stop();
}, 60_000);

test("static GPUs are tied to the endpoints whose dcgm_url and gpu_ids name them; the page is served with the snapshot", async () => {
  const sim = await startSim(["--model", "m", "--itl-ms", "2", "--gpus", "2", "--dcgm-port", "0"]);
  const dcgmUrl = `${sim.dcgm}/metrics`;
  // One machine's exporter, its two GPUs split between two endpoints (as two engines on one node would be).
  const gw = await startGateway(
    {
      health: { poll_interval_ms: 100 },
      endpoints: [
        { id: "left", url: sim.api, dcgm_url: dcgmUrl, gpu_ids: ["0"] },
        { id: "right", url: sim.api, dcgm_url: dcgmUrl, gpu_ids: ["1"] },
      ],
    },
    2,
  );
  const snap = await waitUntil(
    async () => {
      const s = dashboardSnapshotSchema.parse(await (await fetch(`${gw.admin}/admin/v1/dashboard`)).json());
      return s.gpus.length === 2 ? s : null;
    },
    { what: "two GPUs in the snapshot" },
  );
  expect(snap.gpus.map((g) => ({ index: g.index, exporter: g.exporter, serves: g.serves })).sort((a, b) => a.index! - b.index!)).toEqual([
    { index: 0, exporter: dcgmUrl, serves: ["left"] },
    { index: 1, exporter: dcgmUrl, serves: ["right"] },
  ]);

  const html = await (await fetch(`${gw.admin}/dashboard`)).text();
  const block = /<script type="application\/json" id="initial-snapshot">([^<]*)<\/script>/.exec(html);
  expect(block).not.toBeNull();
  const embedded = dashboardSnapshotSchema.parse(JSON.parse(block![1]!));
  expect(embedded.endpoints.map((e) => e.id).sort()).toEqual(["left", "right"]);
  expect(embedded.gpus).toHaveLength(2);
  await gw.stop();
}, 60_000);
