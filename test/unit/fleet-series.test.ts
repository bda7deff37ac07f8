/**
 * Fleet series at scrape time, from literal fleet figures: node and replica
 * state labels, a fleet GPU merged from the agent's inventory and the node's
 * dcgm-exporter (absent stays absent), fabric ports, zeros that are known
 * (a desired model with nothing serving) against figures nobody reported,
 * queue depth per band from the pool table's cumulative counts, and the
 * combined GPU source (a fleet node's exporter is not exported twice).
 */
import { describe, expect, test } from "bun:test";
import { Registry } from "prom-client";
import { fabricPorts, fleetGpuReport, nodeStateLabel, replicaStateLabel } from "../../src/control/metric-figures.ts";
import { type FleetSeriesInput, registerFleetCollector, replicaCounts } from "../../src/metrics/fleet-collector.ts";
import { DcgmGpuStore } from "../../src/metrics/gpu-collector.ts";
import { bandDepths, registerPoolCollector } from "../../src/metrics/pool-collector.ts";
import type { AgentGpu, AgentSnapshot, DcgmVerdicts } from "../../src/protocol/agent-messages.ts";
import type { GpuReport } from "../../src/protocol/gpu-report.ts";
import { PoolTable } from "../../src/shared/endpoint-table.ts";

const MIB = 1024 * 1024;

function agentGpu(over: Partial<AgentGpu> = {}): AgentGpu {
  return {
    index: 0,
    uuid: "GPU-a0",
    name: "NVIDIA H200",
    class: "h200-141g",
    memoryTotalMiB: 143771,
    memoryTotalGiB: 140.4,
    memoryUsedMiB: 1000,
    computeCapability: "9.0",
    utilizationPct: 40,
    eccUncorrectedVolatile: 0,
    eccCorrectedVolatile: 0,
    migEnabled: false,
    health: { ok: true, reasons: [], foreignProcesses: [] },
    ...over,
  };
}

function dcgmReport(over: Partial<GpuReport> = {}): GpuReport {
  return {
    uuid: "GPU-sim-0",
    index: 0,
    migInstance: undefined,
    gpuClass: "h100-80g",
    memoryTotalBytes: 143771 * MIB,
    memoryUsedBytes: 50_000 * MIB,
    utilization: 0.9,
    temperatureC: 61,
    powerW: 420,
    faultKinds: [],
    faultReasons: [],
    ...over,
  };
}

function verdicts(reports: GpuReport[]): DcgmVerdicts {
  return {
    ok: true,
    sampledAt: 1_000,
    stale: false,
    lastError: undefined,
    gpus: reports.map((r) => ({ uuid: r.uuid, index: r.index, reasons: r.faultReasons, report: r })),
  };
}

describe("labels", () => {
  test("a node: not answering wins over everything, then a running drain, then a cordon", () => {
    expect(nodeStateLabel("NotReady", true, true)).toBe("not_ready");
    expect(nodeStateLabel("Unknown", false, false)).toBe("not_ready");
    expect(nodeStateLabel("Ready", true, true)).toBe("draining");
    expect(nodeStateLabel("Ready", false, true)).toBe("cordoned");
    expect(nodeStateLabel("Ready", false, false)).toBe("ready");
  });

  test("a replica: leaving wins; Lost and Missing are lost; Starting is loading once a shard loads", () => {
    const v = (phase: Parameters<typeof replicaStateLabel>[0]["phase"], draining = false) => ({
      phase,
      record: { draining: draining ? { since: 0, reason: "drain" as const, graceMs: 1 } : null },
    });
    expect(replicaStateLabel(v("Ready", true), [])).toBe("draining");
    expect(replicaStateLabel(v("Ready"), [])).toBe("ready");
    expect(replicaStateLabel(v("Failed"), [])).toBe("failed");
    expect(replicaStateLabel(v("Lost"), [])).toBe("lost");
    expect(replicaStateLabel(v("Missing"), [])).toBe("lost");
    expect(replicaStateLabel(v("Pending"), [])).toBe("starting");
    expect(replicaStateLabel(v("Starting"), ["Starting", "Ready"])).toBe("starting");
    expect(replicaStateLabel(v("Starting"), ["Loading", "Ready"])).toBe("loading");
  });
});

describe("a fleet GPU", () => {
  test("identity and class from the agent; figures from DCGM where it sends them (matched by index when UUIDs differ)", () => {
    const r = fleetGpuReport(agentGpu(), verdicts([dcgmReport()]));
    expect(r).toEqual({ ...dcgmReport(), uuid: "GPU-a0", gpuClass: "h200-141g" });
    expect(r.memoryUsedBytes).toBe(50_000 * MIB);
  });

  test("without an exporter: nvidia-smi's figures; temperature and power absent, not 0; no utilisation when the driver gives none", () => {
    const r = fleetGpuReport(agentGpu({ utilizationPct: null, memoryUsedMiB: null }), undefined);
    expect(r.memoryTotalBytes).toBe(143771 * MIB);
    expect(r.memoryUsedBytes).toBeUndefined();
    expect(r.utilization).toBeUndefined();
    expect(r.temperatureC).toBeUndefined();
    expect(r.powerW).toBeUndefined();
  });

  test("an exporter that does not report utilisation leaves nvidia-smi's; neither: absent", () => {
    expect(fleetGpuReport(agentGpu(), verdicts([dcgmReport({ utilization: undefined })])).utilization).toBe(0.4);
    expect(fleetGpuReport(agentGpu({ utilizationPct: null }), verdicts([dcgmReport({ utilization: undefined })])).utilization).toBeUndefined();
  });

  test("faults as placement sees them: the exporter's XID, the agent's uncorrected ECC; MIG mode keeps it out without a fault kind", () => {
    const xid = fleetGpuReport(agentGpu(), verdicts([dcgmReport({ faultKinds: ["xid"], faultReasons: ["xid 79: GPU has fallen off the bus"] })]));
    expect({ kinds: xid.faultKinds, reasons: xid.faultReasons }).toEqual({ kinds: ["xid"], reasons: ["DCGM: xid 79: GPU has fallen off the bus"] });
    const ecc = fleetGpuReport(agentGpu({ eccUncorrectedVolatile: 2, health: { ok: false, reasons: ["ecc_uncorrected"], foreignProcesses: [] } }), undefined);
    expect(ecc.faultKinds).toEqual(["ecc"]);
    expect(ecc.faultReasons[0]).toContain("ECC: 2 uncorrected");
    const mig = fleetGpuReport(agentGpu({ migEnabled: true, health: { ok: false, reasons: ["mig_enabled"], foreignProcesses: [] } }), undefined);
    expect({ kinds: mig.faultKinds, reasons: mig.faultReasons.length }).toEqual({ kinds: [], reasons: 1 });
    // A foreign process is reported by the agent, not a reason to keep the GPU out.
    expect(
      fleetGpuReport(agentGpu({ health: { ok: false, reasons: ["foreign_process"], foreignProcesses: [{ pid: 1, usedMemoryMiB: 5 }] } }), undefined)
        .faultReasons,
    ).toEqual([]);
  });

  test("fabric ports: rate in bytes per second (absent when sysfs has none), active flag, link layer", () => {
    const snap = {
      state: {
        fabric: {
          island: "fabric",
          adapters: [
            {
              name: "mlx5_0",
              ports: [
                { port: 1, state: "ACTIVE", active: true, rate: "400 Gb/sec (4X NDR)", rateGbps: 400, linkLayer: "InfiniBand", transport: "ib" },
                { port: 2, state: "DOWN", active: false, rate: null, rateGbps: null, linkLayer: null, transport: "other" },
              ],
            },
          ],
        },
      },
    } as unknown as AgentSnapshot;
    expect(fabricPorts("n1", snap)).toEqual([
      { node: "n1", adapter: "mlx5_0", port: 1, linkLayer: "InfiniBand", rateBytesPerSecond: 50e9, active: true },
      { node: "n1", adapter: "mlx5_0", port: 2, linkLayer: undefined, rateBytesPerSecond: undefined, active: false },
    ]);
  });
});

async function scrapeFleet(input: FleetSeriesInput | undefined): Promise<string[]> {
  const registry = new Registry();
  registerFleetCollector(registry, () => input);
  return (await registry.metrics()).split("\n").filter((l) => l.startsWith("llmgw_"));
}

describe("fleet collector", () => {
  const input: FleetSeriesInput = {
    nodes: [
      { name: "a", state: "ready", answering: true },
      { name: "b", state: "not_ready", answering: false },
      { name: "c", state: "draining", answering: true },
    ],
    fabric: [
      { node: "a", adapter: "mlx5_0", port: 1, linkLayer: "InfiniBand", rateBytesPerSecond: 50e9, active: true },
      { node: "a", adapter: "mlx5_1", port: 1, linkLayer: undefined, rateBytesPerSecond: undefined, active: false },
    ],
    replicas: [
      { model: "m", state: "ready" },
      { model: "m", state: "draining" },
      { model: "old", state: "draining" },
    ],
    models: [
      { name: "m", desired: 2, serving: 1 },
      { name: "idle", desired: 1, serving: 0 },
    ],
  };

  test("nodes by state (every state, zeros known), readiness per node, fabric (no rate series without a rate)", async () => {
    const lines = await scrapeFleet(input);
    expect(lines.filter((l) => l.startsWith("llmgw_nodes{"))).toEqual([
      'llmgw_nodes{state="ready"} 1',
      'llmgw_nodes{state="not_ready"} 1',
      'llmgw_nodes{state="cordoned"} 0',
      'llmgw_nodes{state="draining"} 1',
    ]);
    expect(lines.filter((l) => l.startsWith("llmgw_node_ready{"))).toEqual([
      'llmgw_node_ready{node="a"} 1',
      'llmgw_node_ready{node="b"} 0',
      'llmgw_node_ready{node="c"} 1',
    ]);
    expect(lines.filter((l) => l.startsWith("llmgw_fabric_port_rate_bytes_per_second{"))).toEqual([
      'llmgw_fabric_port_rate_bytes_per_second{node="a",adapter="mlx5_0",port="1",link_layer="InfiniBand"} 50000000000',
    ]);
    expect(lines.filter((l) => l.startsWith("llmgw_fabric_port_active{"))).toEqual([
      'llmgw_fabric_port_active{node="a",adapter="mlx5_0",port="1",link_layer="InfiniBand"} 1',
      'llmgw_fabric_port_active{node="a",adapter="mlx5_1",port="1"} 0',
    ]);
  });

  test("models desired vs serving: serving 0 exported for a desired model with nothing serving; replicas of a removed model still counted", async () => {
    const lines = await scrapeFleet(input);
    expect(lines.filter((l) => l.startsWith("llmgw_model_replicas_"))).toEqual([
      'llmgw_model_replicas_desired{model="m"} 2',
      'llmgw_model_replicas_desired{model="idle"} 1',
      'llmgw_model_replicas_serving{model="m"} 1',
      'llmgw_model_replicas_serving{model="idle"} 0',
    ]);
    const counts = replicaCounts(input);
    expect([...counts.keys()]).toEqual(["m", "idle", "old"]);
    expect(counts.get("m")).toMatchObject({ ready: 1, draining: 1, starting: 0, lost: 0 });
    expect(lines).toContain('llmgw_replicas{model="old",state="draining"} 1');
    expect(lines).toContain('llmgw_replicas{model="idle",state="ready"} 0');
  });

  test("no fleet: no fleet series at all", async () => {
    expect(await scrapeFleet(undefined)).toEqual([]);
  });

  test("one read of the fleet per scrape", async () => {
    let reads = 0;
    const registry = new Registry();
    registerFleetCollector(registry, () => (reads++, input));
    await registry.metrics();
    expect(reads).toBe(1);
    await registry.metrics();
    expect(reads).toBe(2);
  });
});

describe("pool queue depth per band", () => {
  test("depth of band b is ahead[b] − ahead[b−1]; every (pool, band) exported", async () => {
    const pools = new PoolTable(4, 3);
    pools.setQueued(0, [2, 0, 5]);
    pools.setQueued(1, [0, 3, 0]);
    expect(bandDepths(pools, 0)).toEqual([2, 0, 5]);
    expect(bandDepths(pools, 1)).toEqual([0, 3, 0]);
    const registry = new Registry();
    registerPoolCollector(registry, pools, ["interactive", "standard", "batch"], () => [
      { index: 0, name: "default" },
      { index: 1, name: "big" },
    ]);
    const lines = (await registry.metrics()).split("\n").filter((l) => l.startsWith("llmgw_pool_queue_depth{"));
    expect(lines).toEqual([
      'llmgw_pool_queue_depth{pool="default",band="interactive"} 2',
      'llmgw_pool_queue_depth{pool="default",band="standard"} 0',
      'llmgw_pool_queue_depth{pool="default",band="batch"} 5',
      'llmgw_pool_queue_depth{pool="big",band="interactive"} 0',
      'llmgw_pool_queue_depth{pool="big",band="standard"} 3',
      'llmgw_pool_queue_depth{pool="big",band="batch"} 0',
    ]);
  });
});

describe("the combined GPU source", () => {
  test("an exporter that belongs to a fleet node is left out of the static GPUs (its GPUs are the node's)", () => {
    const store = new DcgmGpuStore(5_000);
    store.update({ type: "gpus", url: "http://10.0.0.1:9400/metrics", sampledAt: 1_000, gpus: [dcgmReport()] });
    store.update({ type: "gpus", url: "http://10.0.0.2:9400/metrics", sampledAt: 1_000, gpus: [dcgmReport({ uuid: "GPU-static" })] });
    expect(store.live(2_000).map((g) => g.node)).toEqual(["10.0.0.1", "10.0.0.2"]);
    expect(store.live(2_000, new Set(["http://10.0.0.1:9400/metrics"])).map((g) => g.gpu.uuid)).toEqual(["GPU-static"]);
  });
});
