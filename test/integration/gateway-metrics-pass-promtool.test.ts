/**
 * What Prometheus scrapes must parse: the gateway's /metrics after real
 * traffic passes `promtool check metrics` with no complaint (the shipped
 * Prometheus configuration is checked in deploy-monitoring-configs.test.ts).
 */
import { afterAll, expect } from "bun:test";
import { counterValue, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";
import { runTool as promtool, testWithTool } from "../helpers/system-tools.ts";

afterAll(stopAll);

testWithTool("promtool", "gateway /metrics after traffic passes promtool check metrics", async (bin) => {
  const sim = await startSim(["--model", "m", "--itl-ms", "2"]);
  const gw = await startGateway({ endpoints: [{ id: "sim", url: sim.api }] }, 1);
  for (const stream of [true, false]) {
    const res = await fetch(`${gw.api}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: "m", stream, max_tokens: 3, messages: [{ role: "user", content: "hi" }] }) });
    expect(res.status).toBe(200);
    await res.text();
  }
  await fetch(`${gw.api}/v1/chat/completions`, { method: "POST", body: "{oops" });
  const text = await gw.metrics();
  expect(counterValue(text, "llmgw_requests_total", { outcome: "ok" })).toBe(2);
  expect(counterValue(text, "llmgw_requests_total", { model: "unknown", outcome: "client_error" })).toBe(1);
  // No complaint at all: prom-client's misnamed nodejs_active_*_total gauges are dropped.
  const r = await promtool(bin, ["check", "metrics"], text);
  expect(r.out.trim()).toBe("");
  expect(r.code).toBe(0);
  expect(text).toContain("llmgw_router_overhead_seconds_bucket");
});
