/**
 * What Prometheus scrapes must parse: the gateway's /metrics after real
 * traffic passes `promtool check metrics` with no complaint, and the shipped
 * scrape configuration passes `promtool check config`.
 */
import { afterAll, expect } from "bun:test";
import { join } from "node:path";
import { counterValue, startGateway, startSim } from "../helpers/cluster.ts";
import { REPO_ROOT, stopAll } from "../helpers/processes.ts";
import { testWithTool } from "../helpers/system-tools.ts";

afterAll(stopAll);

async function promtool(bin: string, args: string[], stdin?: string): Promise<{ code: number; out: string }> {
  const proc = Bun.spawn([bin, ...args], { stdin: stdin === undefined ? "ignore" : new TextEncoder().encode(stdin), stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, out: out + err };
}

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
  const r = await promtool(bin, ["check", "metrics"], text);
  // prom-client's default process metrics name three gauges nodejs_active_*_total;
  // those are the only complaints allowed, and none may concern llmgw's own series.
  const complaints = r.out.split("\n").filter((l) => l.trim() !== "");
  const foreign = complaints.filter((l) => !/^nodejs_active_(handles|requests|resources)_total non-counter metrics should not have "_total" suffix$/.test(l.trim()));
  expect(foreign).toEqual([]);
  expect(text).toContain("llmgw_router_overhead_seconds_bucket");
});

testWithTool("promtool", "deploy/monitoring/prometheus.yml passes promtool check config", async (bin) => {
  const r = await promtool(bin, ["check", "config", join(REPO_ROOT, "deploy", "monitoring", "prometheus.yml")]);
  expect(r.code).toBe(0);
  expect(r.out).toContain("SUCCESS");
});
