import { describe, expect, test } from "bun:test";
import { assessGpu, DEFAULT_GPU_THRESHOLDS } from "../../src/gpuhealth/assess.ts";
import { type GpuSample, parseDcgmExport, parseDcgmMetrics } from "../../src/gpuhealth/dcgm.ts";
import { FATAL_XIDS } from "../../src/gpuhealth/xid.ts";
import { sharedFixture as fixture } from "../helpers/fixtures.ts";

const T4 = "dcgm-exporter-metrics__tesla-t4__datadog-fixture.txt";

/** A labelled series line for GPU 0 of a made-up H100 host, current label names. */
function line(name: string, value: string | number, extra = ""): string {
  return `${name}{gpu="0",UUID="GPU-h100-0",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",hostname="node-a"${extra}} ${value}`;
}

function only(text: string): GpuSample {
  const gpus = parseDcgmMetrics(text);
  expect(gpus).toHaveLength(1);
  return gpus[0]!;
}

describe("DCGM over the Tesla T4 sample", () => {
  // Caveats (SOURCES.md): partly synthetic, two hosts/drivers in one file, a
  // trailing A10G line with Kubernetes labels, and dummy label-less series.
  const parsed = parseDcgmExport(fixture(T4));

  test("one sample per UUID, in first-seen order", () => {
    expect(parsed.gpus.map((g) => g.uuid)).toEqual(["GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e", "GPU-9ef1b6d0-3643-5dd7-b823-c0ec20dcf2d5", "GPU-abc"]);
    expect(parsed.malformedLines).toBe(0);
  });

  test("label-less dummy series are not attributed to any GPU", () => {
    // UNCORRECTABLE_REMAPPED_ROWS, MEMORY_TEMP, ROW_REMAP_FAILURE,
    // CORRECTABLE_REMAPPED_ROWS, GR_ENGINE_ACTIVE, SM_ACTIVE, PIPE_TENSOR_ACTIVE
    // (FAN_SPEED, PCIE_RX/TX, SM_OCCUPANCY and the FP* pipes are not fields we read).
    expect(parsed.unattributed).toBe(7);
    for (const g of parsed.gpus) {
      expect(g.rowRemapFailure).toBeUndefined();
      expect(g.memoryTempC).toBeUndefined();
    }
  });

  test("the first T4: identity from labels, readings as sent", () => {
    const g = parsed.gpus[0]!;
    expect(g).toMatchObject({
      gpu: 0,
      device: "nvidia0",
      modelName: "Tesla T4",
      hostname: "424773df46e0",
      pciBusId: undefined,
      driverVersion: "460.106.00",
      migInstance: undefined,
      utilPct: 0,
      fbUsedMiB: 0,
      fbFreeMiB: 15109,
      tempC: 25,
      powerW: 8.969,
      smClockMHz: 300,
      lastXid: 0,
      pcieReplays: 0,
    });
    // Not in this exporter's output: absent, not zero.
    expect(g.eccDbeVolatile).toBeUndefined();
    expect(g.slowdownTempC).toBeUndefined();
  });

  test("the second T4 has only the config-ish fields", () => {
    const g = parsed.gpus[1]!;
    expect(g.hostname).toBe("551bdf382151");
    expect(g.driverVersion).toBe("470.182.03");
    expect(g.slowdownTempC).toBe(93);
    expect(g.fbTotalMiB).toBe(15109);
    expect(g.tempC).toBeUndefined();
    expect(g.utilPct).toBeUndefined();
  });

  test("the A10G line: Kubernetes labels ignored, DRAM active read", () => {
    const g = parsed.gpus[2]!;
    expect(g.modelName).toBe("NVIDIA A10G");
    expect(g.hostname).toBe("ip-11111");
    expect(g.dramActive).toBeCloseTo(0.000003, 9);
  });

  test("every GPU of the sample is healthy and idle", () => {
    for (const g of parsed.gpus) expect(assessGpu(g)).toEqual({ faulted: false, reasons: [], kinds: [], saturated: false });
  });
});

describe("DCGM snippets", () => {
  test("current labels: lowercase hostname, pci_bus_id, ECC counters", () => {
    const g = only(
      [
        line("DCGM_FI_DEV_GPU_UTIL", 97),
        line("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", 12),
        line("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 0),
        line("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", 3),
        line("DCGM_FI_DEV_XID_ERRORS", 13),
      ].join("\n"),
    );
    expect(g).toMatchObject({
      hostname: "node-a",
      pciBusId: "00000000:18:00.0",
      utilPct: 97,
      eccSbeVolatile: 12,
      eccDbeVolatile: 0,
      eccDbeAggregate: 3,
      lastXid: 13,
    });
    // XID 13 is an application fault; lifetime DBEs alone do not fault a GPU.
    expect(assessGpu(g)).toEqual({ faulted: false, reasons: [], kinds: [], saturated: true });
  });

  test("MIG instances are separate samples of the same UUID", () => {
    const gpus = parseDcgmMetrics([line("DCGM_FI_DEV_FB_USED", 100, ',GPU_I_ID="1"'), line("DCGM_FI_DEV_FB_USED", 200, ',GPU_I_ID="2"')].join("\n"));
    expect(gpus.map((g) => [g.uuid, g.migInstance, g.fbUsedMiB])).toEqual([
      ["GPU-h100-0", "1", 100],
      ["GPU-h100-0", "2", 200],
    ]);
  });

  test("NaN readings stay absent", () => {
    expect(only(line("DCGM_FI_DEV_GPU_TEMP", "NaN")).tempC).toBeUndefined();
  });

  test("empty and garbage text yield no GPUs", () => {
    expect(parseDcgmMetrics("")).toEqual([]);
    expect(parseDcgmExport("not prometheus {{").malformedLines).toBe(1);
  });
});

describe("assessGpu", () => {
  test("fatal last XIDs fault the GPU; the reason names the code", () => {
    for (const xid of [48, 63, 64, 74, 79, 92, 94, 95, 119, 120]) {
      const a = assessGpu(only(line("DCGM_FI_DEV_XID_ERRORS", xid)));
      expect(a.faulted).toBe(true);
      expect(a.reasons).toEqual([`xid ${xid}: ${FATAL_XIDS.get(xid)}`]);
      expect(a.kinds).toEqual(["xid"]);
    }
  });

  test("application-class XIDs do not", () => {
    for (const xid of [0, 13, 31, 43, 45]) expect(assessGpu(only(line("DCGM_FI_DEV_XID_ERRORS", xid))).faulted).toBe(false);
  });

  test("the recent-XID window counter is read too", () => {
    const g = only(
      [line("DCGM_FI_DEV_XID_ERRORS", 13), line("DCGM_EXP_XID_ERRORS_COUNT", 1, ',xid="79"'), line("DCGM_EXP_XID_ERRORS_COUNT", 4, ',xid="13"')].join("\n"),
    );
    expect(g.recentXids).toEqual({ 79: 1, 13: 4 });
    expect(assessGpu(g).reasons).toEqual(["xid 79: GPU has fallen off the bus"]);
  });

  test("volatile DBE, row-remap failure/pending, retirement pending, temperatures", () => {
    const g = only(
      [
        line("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 2),
        line("DCGM_FI_DEV_ROW_REMAP_FAILURE", 1),
        line("DCGM_FI_DEV_ROW_REMAP_PENDING", 1),
        line("DCGM_FI_DEV_RETIRED_PENDING", 1),
        line("DCGM_FI_DEV_GPU_TEMP", 91),
        line("DCGM_FI_DEV_MEMORY_TEMP", 96),
      ].join("\n"),
    );
    expect(assessGpu(g).kinds).toEqual(["ecc", "row_remap", "page_retirement", "temperature", "memory_temperature"]);
    expect(assessGpu(g).reasons).toEqual([
      "uncorrectable ECC errors: 2 since driver load",
      "row remap failure",
      "row remap pending: reset the GPU to apply it",
      "page retirement pending: reset the GPU to apply it",
      "temperature 91 C >= 90 C",
      "memory temperature 96 C >= 95 C",
    ]);
  });

  test("thresholds are overridable; just under a threshold is fine", () => {
    const g = only([line("DCGM_FI_DEV_GPU_TEMP", 89), line("DCGM_FI_DEV_GPU_UTIL", 94)].join("\n"));
    expect(assessGpu(g)).toEqual({ faulted: false, reasons: [], kinds: [], saturated: false });
    expect(assessGpu(g, { maxTempC: 85, saturatedUtilPct: 90 })).toEqual({
      faulted: true,
      reasons: ["temperature 89 C >= 85 C"],
      kinds: ["temperature"],
      saturated: true,
    });
    expect(assessGpu(only(line("DCGM_FI_DEV_XID_ERRORS", 13)), { fatalXids: new Map([[13, "strict site policy"]]) }).faulted).toBe(true);
    expect(DEFAULT_GPU_THRESHOLDS.saturatedUtilPct).toBe(95);
  });

  test("saturation falls back to the DCP graphics-engine ratio", () => {
    expect(assessGpu(only(line("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.99))).saturated).toBe(true);
    expect(assessGpu(only(line("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.5))).saturated).toBe(false);
  });

  test("a GPU with no readings is neither faulted nor saturated", () => {
    expect(assessGpu(only(line("DCGM_FI_DEV_SM_CLOCK", 1980)))).toEqual({ faulted: false, reasons: [], kinds: [], saturated: false });
  });
});
