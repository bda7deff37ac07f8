/** Issue 12's metrics: values read from the parts at scrape time, series absent for parts not running, and text promtool accepts. */
import { describe, expect, test } from "bun:test";
import { Registry } from "prom-client";
import { JobsMetrics } from "../../src/metrics/jobs-metrics.ts";
import { counterValue } from "../helpers/cluster.ts";
import { testWithTool } from "../helpers/system-tools.ts";

function fullRegistry(): { registry: Registry; metrics: JobsMetrics; state: { saturated: boolean } } {
  const registry = new Registry();
  const state = { saturated: true };
  const metrics = new JobsMetrics(registry, {
    pools: () => ["default", "big"],
    poolSaturated: (pool) => pool === "big" && state.saturated,
    batchLineStats: () => ({ completed: 7, failed: 1, retried: 2, waited: 5 }),
    cacheStats: () => ({ hits: 3, misses: 4, bytes: 1234 }),
    idempotentReplays: () => 6,
  });
  return { registry, metrics, state };
}

describe("jobs metrics", () => {
  test("counts come from the parts; the shed counter is what the gateway increments", async () => {
    const { registry, metrics, state } = fullRegistry();
    metrics.gpuShed.inc({ pool: "big" });
    metrics.gpuShed.inc({ pool: "big" });
    let text = await registry.metrics();
    expect(counterValue(text, "llmgw_gpu_shed_total", { pool: "big" })).toBe(2);
    expect(text).toContain('llmgw_gpu_shed_total{pool="default"} 0');
    expect(counterValue(text, "llmgw_pool_gpu_saturated", { pool: "big" })).toBe(1);
    expect(counterValue(text, "llmgw_batch_lines_total", { outcome: "waited" })).toBe(5);
    expect(counterValue(text, "llmgw_response_cache_lookups_total", { result: "hit" })).toBe(3);
    expect(counterValue(text, "llmgw_response_cache_bytes")).toBe(1234);
    expect(counterValue(text, "llmgw_idempotent_replays_total")).toBe(6);
    state.saturated = false;
    text = await registry.metrics();
    expect(counterValue(text, "llmgw_pool_gpu_saturated", { pool: "big" })).toBe(0);
  });

  test("parts that do not run have no series (absent is not zero)", async () => {
    const registry = new Registry();
    new JobsMetrics(registry, { pools: () => ["default"] });
    const text = await registry.metrics();
    const samples = text.split("\n").filter((l) => l !== "" && !l.startsWith("#"));
    for (const name of [
      "llmgw_gpu_shed_total",
      "llmgw_pool_gpu_saturated",
      "llmgw_batch_lines_total",
      "llmgw_response_cache_lookups_total",
      "llmgw_idempotent_replays_total",
    ]) {
      expect(samples.filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))).toEqual([]);
    }
  });
});

testWithTool("promtool", "jobs metrics pass promtool check metrics", async (bin) => {
  const { registry } = fullRegistry();
  const proc = Bun.spawn([bin, "check", "metrics"], { stdin: new TextEncoder().encode(await registry.metrics()), stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect(out + err).toBe("");
  expect(code).toBe(0);
});
