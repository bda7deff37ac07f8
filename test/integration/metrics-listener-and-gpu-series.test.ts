/**
 * The three listeners, checked with a real gateway in front of a sim-engine
 * with two simulated GPUs: the metrics listener answers metrics and health
 * and 404s everything else (diagnostics included); the GPU series follow the
 * DCGM exporter (absent utilisation stays absent, XID 79 shows as a fault, an
 * exporter that stops answering drops its GPUs); every listener's scrape
 * passes `promtool check metrics` outright; and /metrics answers 503 until the
 * first engine poll completed.
 */
import { afterAll, expect, test } from "bun:test";
import { counterValue, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { optionalTool, runTool } from "../helpers/system-tools.ts";

afterAll(stopAll);

/** Paths only the admin listener (or the API) serves, and some nobody serves. */
const NOT_ON_METRICS_LISTENER = [
  "/",
  "/admin/v1/endpoints",
  "/openapi",
  "/openapi/json",
  "/dashboard",
  "/dashboard/dashboard.js",
  "/admin/v1/dashboard",
  "/debug/heap",
  "/debug/pprof/heap",
  "/admin/v1/heap-snapshot",
  "/v1/models",
  "/metrics/extra",
];

function gpuLines(text: string, name: string): string[] {
  return text.split("\n").filter((l) => l.startsWith(`${name}{`));
}

test("metrics listener: metrics and health only; GPU series from DCGM at scrape time; promtool-clean on every listener", async () => {
  const sim = await startSim(["--model", "m", "--itl-ms", "2", "--gpus", "2", "--dcgm-port", "0"]);
  const gw = await startGateway(
    {
      metrics_listen: "127.0.0.1:0",
      health: { poll_interval_ms: 100, stale_after_ms: 1000 },
      endpoints: [{ id: "sim", url: sim.api, dcgm_url: `${sim.dcgm}/metrics` }],
    },
    1,
  );
  const metricsUrl = gw.urls.metrics!;
  expect(metricsUrl).toBeDefined();

  for (const path of ["/metrics", "/healthz", "/readyz"]) expect((await fetch(`${metricsUrl}${path}`)).status).toBe(200);
  for (const path of NOT_ON_METRICS_LISTENER) {
    for (const method of ["GET", "POST"]) {
      const res = await fetch(`${metricsUrl}${path}`, { method });
      expect({ path, method, status: res.status }).toEqual({ path, method, status: 404 });
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("NOT_FOUND");
    }
  }
  // The API listener serves the OpenAI API alone.
  for (const path of ["/metrics", "/admin/v1/endpoints", "/openapi/json"])
    expect({ path, status: (await fetch(`${gw.api}${path}`)).status }).toEqual({ path, status: 404 });
  // The admin listener serves what the metrics listener refuses.
  expect((await fetch(`${gw.admin}/admin/v1/endpoints`)).status).toBe(200);
  expect((await fetch(`${gw.admin}/openapi/json`)).status).toBe(200);
  expect((await fetch(`${gw.admin}/no-such-route`)).status).toBe(404);

  const res = await fetch(`${gw.api}/v1/chat/completions`, {
    method: "POST",
    body: JSON.stringify({ model: "m", max_tokens: 2, messages: [{ role: "user", content: "hi" }] }),
  });
  expect(res.status).toBe(200);
  await res.text();

  // Both GPUs, on the node named after the dcgm_url host, with plausible values.
  const text = await waitUntil(
    async () => {
      const t = await (await fetch(`${metricsUrl}/metrics`)).text();
      return gpuLines(t, "llmgw_gpu_healthy").length === 2 ? t : "";
    },
    { what: "two GPUs exported" },
  );
  expect(gpuLines(text, "llmgw_gpu_healthy").every((l) => l.includes('node="127.0.0.1"') && l.includes('class="h100-80g"') && l.endsWith(" 1"))).toBe(true);
  expect(counterValue(text, "llmgw_gpu_memory_total_bytes")).toBe(2 * 81559 * 1024 * 1024);
  const util = gpuLines(text, "llmgw_gpu_utilization_ratio").map((l) => Number(l.slice(l.lastIndexOf(" ") + 1)));
  expect(util).toHaveLength(2);
  expect(util.every((u) => u >= 0 && u <= 1)).toBe(true);
  expect(counterValue(text, "llmgw_requests_total", { outcome: "ok" })).toBe(1);

  // promtool finds nothing to complain about on either listener.
  const promtool = optionalTool("promtool");
  if (promtool) {
    for (const url of [metricsUrl, gw.admin]) {
      const r = await runTool(promtool, ["check", "metrics"], await (await fetch(`${url}/metrics`)).text());
      expect({ url, out: r.out.trim(), code: r.code }).toEqual({ url, out: "", code: 0 });
    }
  }

  // GPU 1 stops reporting utilisation and takes an XID 79.
  await sim.configure({ gpus: [{ index: 1, xid_errors: 79, utilization_reported: false }] });
  const faulted = await waitUntil(
    async () => {
      const t = await (await fetch(`${metricsUrl}/metrics`)).text();
      return gpuLines(t, "llmgw_gpu_fault").length === 1 && gpuLines(t, "llmgw_gpu_utilization_ratio").length === 1 ? t : "";
    },
    { what: "GPU 1 faulted, without utilisation" },
  );
  const fault = gpuLines(faulted, "llmgw_gpu_fault")[0]!;
  expect(fault).toContain('gpu="1"');
  expect(fault).toContain('kind="xid"');
  expect(gpuLines(faulted, "llmgw_gpu_utilization_ratio")[0]).toContain('gpu="0"');
  expect(gpuLines(faulted, "llmgw_gpu_healthy").find((l) => l.includes('gpu="1"'))).toEndWith(" 0");
  expect(gpuLines(faulted, "llmgw_gpu_temperature_celsius")).toHaveLength(2);

  // The exporter goes away: past stale_after_ms its GPUs have no series at all.
  await sim.stop();
  await waitUntil(async () => gpuLines(await (await fetch(`${metricsUrl}/metrics`)).text(), "llmgw_gpu_memory_used_bytes").length === 0, {
    what: "GPU series dropped",
    timeoutMs: 5_000,
  });
  await gw.stop();
}, 60_000);

test("/metrics answers 503 until the first engine poll completed", async () => {
  // An engine that takes 1.5 s to answer anything holds the first poll round open.
  const slow = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async () => {
      await Bun.sleep(1_500);
      return new Response("", { status: 503 });
    },
  });
  try {
    const gw = await startGateway({
      metrics_listen: "127.0.0.1:0",
      health: { timeout_ms: 5_000 },
      endpoints: [{ id: "slow", url: `http://127.0.0.1:${slow.port}` }],
    });
    for (const url of [gw.urls.metrics!, gw.admin]) {
      const early = await fetch(`${url}/metrics`);
      expect(early.status).toBe(503);
      expect(((await early.json()) as { error: { code: string } }).error.code).toBe("METRICS_NOT_READY");
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
    }
    await waitUntil(async () => (await fetch(`${gw.urls.metrics}/metrics`)).status === 200, { what: "metrics after the first poll", timeoutMs: 10_000 });
    expect((await fetch(`${gw.admin}/metrics`)).status).toBe(200);
    await gw.stop();
  } finally {
    void slow.stop(true);
  }
}, 30_000);
