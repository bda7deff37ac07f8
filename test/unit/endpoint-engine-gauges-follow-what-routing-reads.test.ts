/**
 * The per-endpoint engine gauges export what the scorers read, with their
 * rule: a figure is there while the endpoint's metrics are fresh, absent when
 * stale, never reported, or reported as absent; an endpoint that left has no
 * series at the next scrape. And llmgw_build_info names the version and Bun.
 */
import { describe, expect, test } from "bun:test";
import pkg from "../../package.json" with { type: "json" };
import { GatewayMetrics } from "../../src/metrics/registry.ts";
import { EndpointTable, F, I } from "../../src/shared/endpoint-table.ts";

const STALE_AFTER_MS = 2_000;

function report(table: EndpointTable, row: number, at: number, kv: number, waiting: number, running: number): void {
  table.setFloat(row, F.METRICS_AT, at);
  table.setFloat(row, F.KV_USAGE, kv);
  table.setInt(row, I.WAITING, waiting);
  table.setInt(row, I.RUNNING, running);
}

/** The samples of `name` in a scrape, by endpoint. */
async function samples(m: GatewayMetrics, name: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const line of (await m.registry.metrics()).split("\n")) {
    const hit = new RegExp(`^${name}\\{endpoint="([^"]+)"\\} (\\S+)$`).exec(line);
    if (hit) out[hit[1]!] = Number(hit[2]);
  }
  return out;
}

describe("per-endpoint engine gauges", () => {
  test("fresh figures are exported; stale, never reported and absent ones are not; a removed endpoint's series go", async () => {
    const table = new EndpointTable(4);
    let live = [
      { index: 0, id: "fresh" },
      { index: 1, id: "stale" },
      { index: 2, id: "never" },
      { index: 3, id: "no-kv" },
    ];
    const m = new GatewayMetrics(table, () => live, { defaultMetrics: false, staleAfterMs: STALE_AFTER_MS });
    const now = Date.now();
    report(table, 0, now, 0.42, 3, 7);
    report(table, 1, now - STALE_AFTER_MS * 3, 0.9, 10, 20);
    report(table, 3, now, NaN, -1, 2);

    expect(await samples(m, "llmgw_endpoint_kv_cache_usage_ratio")).toEqual({ fresh: 0.42 });
    expect(await samples(m, "llmgw_endpoint_requests_waiting")).toEqual({ fresh: 3 });
    expect(await samples(m, "llmgw_endpoint_requests_running")).toEqual({ fresh: 7, "no-kv": 2 });
    // The age says how stale: present for every endpoint ever scraped.
    const age = await samples(m, "llmgw_endpoint_metrics_age_seconds");
    expect(Object.keys(age).sort()).toEqual(["fresh", "no-kv", "stale"]);
    expect(age.stale!).toBeGreaterThanOrEqual((STALE_AFTER_MS * 3) / 1000);

    // "fresh" leaves the fleet; its slot is not reused yet.
    live = live.filter((e) => e.id !== "fresh");
    expect(await samples(m, "llmgw_endpoint_kv_cache_usage_ratio")).toEqual({});
    expect(await samples(m, "llmgw_endpoint_requests_running")).toEqual({ "no-kv": 2 });
  });

  test("the series are bounded by the endpoint table, whatever the fleet does", async () => {
    const rows = 3;
    const table = new EndpointTable(rows);
    const now = Date.now();
    for (let r = 0; r < rows; r++) report(table, r, now, 0.5, 1, 1);
    // Replicas come and go: a thousand ids over time, at most `rows` live at once (slots are reused).
    let generation = 0;
    const m = new GatewayMetrics(table, () => [0, 1, 2].map((index) => ({ index, id: `replica-${generation}-${index}` })), { defaultMetrics: false });
    for (generation = 0; generation < 300; generation += 37) {
      expect(Object.keys(await samples(m, "llmgw_endpoint_requests_waiting")).length).toBe(rows);
    }
  });

  test("llmgw_build_info is 1 with the package version, a commit and the Bun version", async () => {
    const text = await new GatewayMetrics(new EndpointTable(0), () => [], { defaultMetrics: false }).registry.metrics();
    const line = text.split("\n").find((l) => l.startsWith("llmgw_build_info{"));
    expect(line).toBeDefined();
    expect(line).toContain(`version="${pkg.version}"`);
    expect(line).toContain(`bun="${Bun.version}"`);
    expect(line).toMatch(/commit="([0-9a-f]{4,40}|unknown)"/);
    expect(line!.endsWith("} 1")).toBe(true);
  });
});
