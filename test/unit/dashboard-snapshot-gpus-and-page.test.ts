/** The dashboard snapshot's pure parts: what runs on each GPU, a node's cordon reason, and the snapshot embedded in the page without a way out of its data block. */
import { describe, expect, test } from "bun:test";
import { pageWithSnapshot } from "../../src/admin/dashboard/routes.ts";
import { dashboardSnapshot, dashboardSnapshotSchema, gpuServes } from "../../src/admin/dashboard/snapshot.ts";
import type { FleetFigures } from "../../src/control/metric-figures.ts";
import type { NodeGpu } from "../../src/metrics/gpu-collector.ts";
import type { GpuReport } from "../../src/protocol/gpu-report.ts";

const gpu = (index: number, uuid: string): GpuReport => ({
  uuid,
  index,
  migInstance: undefined,
  gpuClass: "h100-80g",
  memoryTotalBytes: undefined,
  memoryUsedBytes: undefined,
  utilization: undefined,
  temperatureC: undefined,
  powerW: undefined,
  faultKinds: [],
  faultReasons: [],
});

const EXPORTER_A = "http://10.0.0.1:9400/metrics";
const EXPORTER_B = "http://10.0.0.2:9400/metrics";
const statics = [
  { id: "by-index", dcgmUrl: EXPORTER_A, gpuIds: ["0"] },
  { id: "by-uuid", dcgmUrl: EXPORTER_A, gpuIds: ["GPU-a1"] },
  { id: "whole-node", dcgmUrl: EXPORTER_B, gpuIds: [] },
  { id: "no-exporter", dcgmUrl: undefined, gpuIds: [] },
];
const replicas: FleetFigures["replicas"] = [
  { id: "fl-m-1", model: "m", state: "ready", shards: [{ node: "gpu-01", gpus: [0, 1] }], inRotation: true, detail: null },
  { id: "fl-m-2", model: "m", state: "ready", shards: [{ node: "gpu-02", gpus: [0] }], inRotation: true, detail: null },
];

describe("what runs on each GPU", () => {
  test("static GPUs: the endpoints whose dcgm_url and gpu_ids (index or UUID; none: all) name them", () => {
    const on = (g: NodeGpu) => gpuServes(g, statics, replicas);
    expect(on({ node: "10.0.0.1", gpu: gpu(0, "GPU-a0"), exporter: EXPORTER_A })).toEqual(["by-index"]);
    expect(on({ node: "10.0.0.1", gpu: gpu(1, "GPU-a1"), exporter: EXPORTER_A })).toEqual(["by-uuid"]);
    expect(on({ node: "10.0.0.1", gpu: gpu(2, "GPU-a2"), exporter: EXPORTER_A })).toEqual([]);
    expect(on({ node: "10.0.0.2", gpu: gpu(5, "GPU-b5"), exporter: EXPORTER_B })).toEqual(["whole-node"]);
  });

  test("fleet GPUs: the replicas with a shard on that node and index", () => {
    const on = (g: NodeGpu) => gpuServes(g, statics, replicas);
    expect(on({ node: "gpu-01", gpu: gpu(1, "GPU-x") })).toEqual(["fl-m-1"]);
    expect(on({ node: "gpu-02", gpu: gpu(0, "GPU-y") })).toEqual(["fl-m-2"]);
    expect(on({ node: "gpu-02", gpu: gpu(1, "GPU-z") })).toEqual([]);
  });

  test("the snapshot carries them, the exporter, and each node's cordon reason", () => {
    const fleet: FleetFigures = {
      nodes: [
        { name: "gpu-01", state: "cordoned", answering: true, lastAnswerAgeMs: 100, lastError: null, cordonReason: "bios update" },
        { name: "gpu-02", state: "ready", answering: true, lastAnswerAgeMs: 100, lastError: null, cordonReason: null },
      ],
      gpus: [],
      fabric: [],
      replicas,
      models: [],
    };
    const snap = dashboardSnapshot({
      at: 1,
      fleet,
      gpus: [
        { node: "gpu-01", gpu: gpu(0, "GPU-x") },
        { node: "10.0.0.1", gpu: gpu(0, "GPU-a0"), exporter: EXPORTER_A },
      ],
      statics,
      endpoints: [],
      pools: [],
      traffic: { requests: 0, errors: 0, ttft: { count: 0, sum: 0, buckets: [] }, time_to_headers: { count: 0, sum: 0, buckets: [] }, completion_tokens: 0 },
    });
    expect(dashboardSnapshotSchema.parse(snap)).toEqual(snap);
    expect(snap.nodes.map((n) => n.cordon_reason)).toEqual(["bios update", null]);
    expect(snap.gpus.map((g) => ({ exporter: g.exporter, serves: g.serves }))).toEqual([
      { exporter: null, serves: ["fl-m-1"] },
      { exporter: EXPORTER_A, serves: ["by-index"] },
    ]);
  });
});

describe("the page with its snapshot", () => {
  const page = "<head><!--llmgw:snapshot--></head>";

  test("a JSON data block that no string inside can close; without a snapshot, nothing", () => {
    const snap = dashboardSnapshot({
      at: 1,
      fleet: undefined,
      gpus: [],
      statics: [],
      endpoints: [{ id: "</script><script>alert(1)</script>", node: null, pool: "p", ready: true, draining: false, gpu_faulted: false, inflight: 0 }],
      pools: [],
      traffic: { requests: 0, errors: 0, ttft: { count: 0, sum: 0, buckets: [] }, time_to_headers: { count: 0, sum: 0, buckets: [] }, completion_tokens: 0 },
    });
    const html = pageWithSnapshot(page, snap);
    expect(html.match(/<\/script>/g)).toHaveLength(1);
    expect(html.match(/<script/g)).toHaveLength(1);
    const json = /<script type="application\/json" id="initial-snapshot">(.*)<\/script>/.exec(html)![1]!;
    expect(JSON.parse(json)).toEqual(snap);
    expect(pageWithSnapshot(page, undefined)).toBe("<head></head>");
  });
});
