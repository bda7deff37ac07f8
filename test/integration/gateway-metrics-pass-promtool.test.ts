/**
 * What Prometheus scrapes must parse: the gateway's /metrics after real
 * traffic passes `promtool check metrics` with no complaint (the shipped
 * Prometheus configuration is checked in deploy-monitoring-configs.test.ts).
 */
import { afterAll, expect } from "bun:test";
import { counterValue, SIM_KV_EVENTS, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { runTool as promtool, testWithTool } from "../helpers/system-tools.ts";

afterAll(stopAll);

testWithTool("promtool", "gateway /metrics after traffic passes promtool check metrics", async (bin) => {
  // The engine publishes KV-cache events: the KV-event and tokenize series are in the scrape too.
  const sim = await startSim(["--model", "m", "--itl-ms", "2", "--kv-events-config", SIM_KV_EVENTS]);
  const gw = await startGateway({ endpoints: [{ id: "sim", url: sim.api, kv_events: { endpoint: sim.kvEvents, replay_endpoint: sim.kvReplay } }] }, 1);
  await waitUntil(async () => counterValue(await gw.metrics(), "llmgw_kv_events_stream_state", { state: "live" }) === 1, { what: "the event stream live" });
  for (const stream of [true, false]) {
    const res = await fetch(`${gw.api}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "m", stream, max_tokens: 3, messages: [{ role: "user", content: "hi" }] }),
    });
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
  for (const name of [
    "llmgw_kv_events_total",
    "llmgw_kv_index_blocks",
    "llmgw_kv_events_staleness_seconds",
    "llmgw_kv_index_drops_total",
    "llmgw_tokenize_requests_total",
  ])
    expect(text).toContain(`${name}{`);
});
