/**
 * Per-GPU series at scrape time: reports built from real DCGM captures,
 * absent fields without series, faults by kind, stale exporters dropped, and
 * the default process metrics without the misnamed `_total` gauges.
 */
import { describe, expect, test } from "bun:test";
import { Registry } from "prom-client";
import { assessGpu } from "../../src/gpuhealth/assess.ts";
import { parseDcgmMetrics } from "../../src/gpuhealth/dcgm.ts";
import { DcgmGpuStore, type NodeGpu, nodeOfDcgmUrl, registerGpuCollector } from "../../src/metrics/gpu-collector.ts";
import { GatewayMetrics } from "../../src/metrics/registry.ts";
import { framebufferTotalMiB, gpuReport } from "../../src/polling/gpu-reports.ts";
import type { GpuReport } from "../../src/protocol/gpu-report.ts";
import { EndpointTable } from "../../src/shared/endpoint-table.ts";
import { sharedFixture } from "../helpers/fixtures.ts";

const T4 = sharedFixture("dcgm-exporter-metrics__tesla-t4__datadog-fixture.txt");
const MIB = 1024 * 1024;

function report(over: Partial<GpuReport> = {}): GpuReport {
  return {
    uuid: "GPU-1",
    index: 0,
    migInstance: undefined,
    gpuClass: "h100-80g",
    memoryTotalBytes: 81559 * MIB,
    memoryUsedBytes: 40000 * MIB,
    utilization: 0.5,
    temperatureC: 50,
    powerW: 300,
    faultKinds: [],
    faultReasons: [],
    ...over,
  };
}

async function scrape(source: () => readonly NodeGpu[]): Promise<string> {
  const registry = new Registry();
  registerGpuCollector(registry, source);
  return await registry.metrics();
}

function series(text: string, name: string): string[] {
  return text.split("\n").filter((l) => l.startsWith(`${name}{`));
}

describe("GPU reports from DCGM samples", () => {
  test("the T4 capture: class from name and framebuffer, utilisation as a ratio, memory in bytes", () => {
    const gpus = parseDcgmMetrics(T4).map((sample) => gpuReport({ sample, assessment: assessGpu(sample) }));
    const first = gpus.find((g) => g.uuid === "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e")!;
    const sample = parseDcgmMetrics(T4).find((g) => g.uuid === first.uuid)!;
    expect(first.gpuClass).toBe(`t4-${Math.round(framebufferTotalMiB(sample)! / 1024)}g`);
    expect(first.memoryUsedBytes).toBe(sample.fbUsedMiB! * MIB);
    expect(first.utilization).toBe(sample.utilPct! / 100);
    expect(first.faultKinds).toEqual([]);
  });

  test("framebuffer total: the field if sent, else used + free + reserved, else absent", () => {
    const [s] = parseDcgmMetrics(
      'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-x"} 10\nDCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-x"} 20\nDCGM_FI_DEV_FB_RESERVED{gpu="0",UUID="GPU-x"} 2\n',
    );
    expect(framebufferTotalMiB(s!)).toBe(32);
    expect(framebufferTotalMiB({ ...s!, fbTotalMiB: 40 })).toBe(40);
    expect(framebufferTotalMiB({ ...s!, fbFreeMiB: undefined })).toBeUndefined();
  });

  test("an XID 79 GPU reports the kind and the reason", () => {
    const [s] = parseDcgmMetrics('DCGM_FI_DEV_XID_ERRORS{gpu="3",UUID="GPU-y",DCGM_FI_DEV_NAME="NVIDIA H200"} 79\n');
    const r = gpuReport({ sample: s!, assessment: assessGpu(s!) });
    expect(r).toMatchObject({ index: 3, faultKinds: ["xid"], faultReasons: ["xid 79: GPU has fallen off the bus"], gpuClass: "h200-unknown" });
    expect(r.utilization).toBeUndefined();
    expect(r.memoryTotalBytes).toBeUndefined();
  });
});

describe("GPU collector", () => {
  test("exports each reported field with node, gpu, uuid and class labels", async () => {
    const text = await scrape(() => [{ node: "10.0.0.11", gpu: report() }]);
    const labels = 'node="10.0.0.11",uuid="GPU-1",class="h100-80g",gpu="0"';
    expect(text).toContain(`llmgw_gpu_memory_total_bytes{${labels}} ${81559 * MIB}`);
    expect(text).toContain(`llmgw_gpu_memory_used_bytes{${labels}} ${40000 * MIB}`);
    expect(text).toContain(`llmgw_gpu_utilization_ratio{${labels}} 0.5`);
    expect(text).toContain(`llmgw_gpu_temperature_celsius{${labels}} 50`);
    expect(text).toContain(`llmgw_gpu_power_watts{${labels}} 300`);
    expect(text).toContain(`llmgw_gpu_healthy{${labels}} 1`);
    expect(series(text, "llmgw_gpu_fault")).toEqual([]);
  });

  test("absent fields have no series: no utilisation is not an idle GPU", async () => {
    const text = await scrape(() => [{ node: "n", gpu: report({ utilization: undefined, powerW: undefined }) }]);
    expect(series(text, "llmgw_gpu_utilization_ratio")).toEqual([]);
    expect(series(text, "llmgw_gpu_power_watts")).toEqual([]);
    expect(series(text, "llmgw_gpu_temperature_celsius")).toHaveLength(1);
  });

  test("a faulted GPU is unhealthy with one series per fault kind", async () => {
    const text = await scrape(() => [{ node: "n", gpu: report({ faultKinds: ["xid", "temperature"], faultReasons: ["a", "b"] }) }]);
    expect(series(text, "llmgw_gpu_healthy")[0]).toEndWith(" 0");
    expect(series(text, "llmgw_gpu_fault").map((l) => /kind="([a-z_]+)"/.exec(l)?.[1])).toEqual(["xid", "temperature"]);
  });

  test("MIG instances of one GPU stay distinct series", async () => {
    const text = await scrape(() => [
      { node: "n", gpu: report({ migInstance: "1" }) },
      { node: "n", gpu: report({ migInstance: "2" }) },
    ]);
    expect(series(text, "llmgw_gpu_healthy")).toHaveLength(2);
  });

  test("series follow the source at every scrape (nothing is kept between scrapes)", async () => {
    let gpus: NodeGpu[] = [{ node: "n", gpu: report() }];
    const registry = new Registry();
    registerGpuCollector(registry, () => gpus);
    expect(series(await registry.metrics(), "llmgw_gpu_healthy")).toHaveLength(1);
    gpus = [];
    expect(series(await registry.metrics(), "llmgw_gpu_healthy")).toEqual([]);
  });
});

describe("DCGM GPU store", () => {
  test("an exporter whose last good scrape is older than stale_after_ms drops its GPUs", () => {
    const store = new DcgmGpuStore(2_000);
    store.update({ type: "gpus", url: "http://10.0.0.11:9400/metrics", sampledAt: 1_000, gpus: [report()] });
    store.update({
      type: "gpus",
      url: "http://10.0.0.12:9400/metrics",
      sampledAt: 2_500,
      gpus: [report({ uuid: "GPU-2" }), report({ uuid: "GPU-3", index: 1 })],
    });
    expect(store.live(3_000).map((g) => [g.node, g.gpu.uuid])).toEqual([
      ["10.0.0.11", "GPU-1"],
      ["10.0.0.12", "GPU-2"],
      ["10.0.0.12", "GPU-3"],
    ]);
    expect(store.live(3_001).map((g) => g.gpu.uuid)).toEqual(["GPU-2", "GPU-3"]);
    // The exporter answers again: its GPUs are back.
    store.update({ type: "gpus", url: "http://10.0.0.11:9400/metrics", sampledAt: 3_100, gpus: [report()] });
    expect(store.live(3_200)).toHaveLength(3);
  });

  test("the node label of a static endpoint is its dcgm_url host", () => {
    expect(nodeOfDcgmUrl("http://10.0.0.11:9400/metrics")).toBe("10.0.0.11");
    expect(nodeOfDcgmUrl("http://gpu-node-7.example:9400/")).toBe("gpu-node-7.example");
  });
});

describe("default process metrics", () => {
  test("the gauges named like counters are gone; their labelled forms stay", async () => {
    const text = await new GatewayMetrics(new EndpointTable(0), () => []).registry.metrics();
    expect(text).not.toContain("nodejs_active_handles_total");
    expect(text).not.toContain("nodejs_active_requests_total");
    expect(text).not.toContain("nodejs_active_resources_total");
    expect(text).toContain("# TYPE nodejs_active_handles gauge");
    expect(text).toContain("process_cpu_seconds_total");
  });
});
