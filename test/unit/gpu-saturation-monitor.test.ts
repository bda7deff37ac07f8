/**
 * The health worker's saturation monitor over scripted dcgm-exporters (the
 * sim's DCGM text): sources from the endpoints' dcgm_url per pool, a pool row
 * published only while every GPU is sustained-saturated, a failing exporter
 * fails open, an endpoint that leaves takes its GPUs along, explicit sources
 * win over the endpoints'.
 */
import { expect, test } from "bun:test";
import { buildConfig } from "../../src/config/load.ts";
import type { GpuHealthConfig } from "../../src/config/types.ts";
import { GpuSaturationMonitor, type SaturationEndpoint } from "../../src/polling/gpu-saturation-monitor.ts";
import type { FetchFn } from "../../src/polling/probe.ts";
import { GpuSaturationTable } from "../../src/shared/gpu-saturation-table.ts";
import { newGpuFaultState } from "../../src/sim/config.ts";
import { gpuSpec, SimGpus } from "../../src/sim/dcgm-text.ts";

/** Exporters by URL: each renders two simulated GPUs at a settable utilisation, or fails. */
function exporters() {
  const state = new Map<string, { util: number; down: boolean; gpus: SimGpus }>();
  const fetchFn: FetchFn = async (url) => {
    const e = state.get(url);
    if (!e || e.down) return new Response("unavailable", { status: 503 });
    const faults = [0, 1].map(() => ({ ...newGpuFaultState(), utilizationPct: e.util }));
    return new Response(e.gpus.render({ utilization: 0 }, faults, 0));
  };
  const set = (url: string, util: number, down = false) => {
    const prev = state.get(url);
    state.set(url, { util, down, gpus: prev?.gpus ?? new SimGpus(gpuSpec("NVIDIA H100 80GB HBM3"), 2, url, url, 0) });
  };
  return { fetchFn, set };
}

function setup(gpuHealth: Record<string, unknown>) {
  const cfg: GpuHealthConfig = buildConfig({ gpu_health: { sustained_samples: 3, stale_after_ms: 1_000, ...gpuHealth } }).gpuHealth!;
  const table = new GpuSaturationTable(4);
  const ex = exporters();
  const monitor = new GpuSaturationMonitor(cfg, table, { timeoutMs: 500, fetch: ex.fetchFn });
  // Scrapes are stamped with Date.now(), and one stamped like the previous adds no sample: space them out.
  const poll = async (n = 1) => {
    for (let i = 0; i < n; i++) {
      await Bun.sleep(2);
      await monitor.pollOnce();
    }
  };
  return { table, monitor, ex, poll };
}

const A = "http://node-a:9400/metrics";
const B = "http://node-b:9400/metrics";
const endpoint = (index: number, pool: string, poolRow: number, dcgmUrl: string | undefined): SaturationEndpoint => ({
  index,
  pool,
  poolRow,
  dcgmUrl,
  gpuIds: [],
});

test("sources from the endpoints: a pool is published saturated once every GPU's ring is full and hot; it clears with one cool sample", async () => {
  const { table, monitor, ex, poll } = setup({});
  ex.set(A, 100);
  ex.set(B, 10);
  monitor.setEndpoint(endpoint(0, "big", 1, A));
  monitor.setEndpoint(endpoint(1, "small", 2, B));
  monitor.setEndpoint(endpoint(2, "big", 1, undefined)); // no exporter: watches nothing, holds nothing open
  await poll(2);
  expect(table.saturated(1, Date.now())).toBe(false); // two samples of three
  await poll();
  expect(table.saturated(1, Date.now())).toBe(true);
  expect(table.saturated(2, Date.now())).toBe(false);
  expect(monitor.view().filter((g) => g.saturated).length).toBe(2);
  ex.set(A, 94);
  await poll();
  expect(table.saturated(1, Date.now())).toBe(false);
});

test("an exporter that stops answering fails open at once on the readers' clock; an endpoint that leaves takes its GPUs along", async () => {
  const { table, monitor, ex, poll } = setup({});
  ex.set(A, 100);
  ex.set(B, 100);
  monitor.setEndpoint(endpoint(0, "big", 1, A));
  await poll(3);
  expect(table.saturated(1, Date.now())).toBe(true);
  ex.set(A, 100, true);
  await poll();
  expect(table.saturated(1, Date.now())).toBe(true); // the last good samples are still fresh
  expect(table.saturated(1, Date.now() + 1_001)).toBe(false); // no writer needed: the deadline passed

  // A second endpoint of the pool on node B (its GPUs idle) holds the pool open; when it leaves, its GPUs go too.
  ex.set(A, 100);
  ex.set(B, 0);
  monitor.setEndpoint(endpoint(1, "big", 1, B));
  await poll(3);
  expect(table.saturated(1, Date.now())).toBe(false);
  monitor.removeEndpoint(1);
  expect(monitor.view().map((g) => g.key.split("#")[0])).toEqual([A, A]);
  await poll();
  expect(table.saturated(1, Date.now())).toBe(true);
});

test("explicit sources win: the endpoints' exporters are not watched, their pools still get their rows", async () => {
  const { table, monitor, ex, poll } = setup({ sources: [{ url: B, pool: "big" }] });
  ex.set(A, 0);
  ex.set(B, 100);
  monitor.setEndpoint(endpoint(0, "big", 3, A));
  await poll(3);
  expect(monitor.view().every((g) => g.key.startsWith(B))).toBe(true);
  expect(table.saturated(3, Date.now())).toBe(true);
});
