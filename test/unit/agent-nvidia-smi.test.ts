import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { discoverGpus } from "../../src/agent/gpu-discovery.ts";
import { gpuHealth } from "../../src/agent/gpu-health.ts";
import { OPTIONAL_GPU_FIELDS, parseComputeAppsCsv, parseGpuCsv, REQUIRED_GPU_FIELDS, rejectedFields } from "../../src/agent/nvidia-smi-csv.ts";
import { computeCapabilityAtLeast, gpuClass, gpuFamily } from "../../src/shared/gpu-class.ts";
import { capturedGpuRows, type GpuRow, queryGpuOutput } from "../fixtures/agent/captures.ts";
import { writeFakeNvidiaSmi } from "../fixtures/agent/fake-tools.ts";
import { sharedFixture } from "../helpers/fixtures.ts";

const FIELDS = [...REQUIRED_GPU_FIELDS, ...OPTIONAL_GPU_FIELDS];
const CAPTURES = {
  h200: "nvidia-smi-capture__linux-x86_64__nvidia-h200__590.48.01.txt",
  h100: "nvidia-smi-capture__linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt",
  mig: "nvidia-smi-capture__linux-x86_64__nvidia-h100-mig__590.48.01.txt",
  rtx: "nvidia-smi-capture__linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.txt",
} as const;

function rows(capture: keyof typeof CAPTURES, phase: "idle" | "load"): GpuRow[] {
  return capturedGpuRows(sharedFixture(CAPTURES[capture]), phase);
}

function parseCapture(capture: keyof typeof CAPTURES, phase: "idle" | "load") {
  const out = queryGpuOutput(rows(capture, phase), FIELDS);
  if (!("stdout" in out)) throw new Error(`capture lacks ${out.unknownField}`);
  return parseGpuCsv(out.stdout, FIELDS);
}

const tmp = mkdtempSync(join(tmpdir(), "agent-nvsmi-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("nvidia-smi query-gpu parsing over the real captures", () => {
  test("H200: 143,771 MiB, cc 9.0, ECC 0, utilisation idle 0 and load 100", () => {
    const idle = parseCapture("h200", "idle");
    expect(idle.malformed).toEqual([]);
    expect(idle.gpus).toHaveLength(1);
    const g = idle.gpus[0]!;
    expect(g).toMatchObject({
      index: 0,
      name: "NVIDIA H200",
      memoryTotalMiB: 143771,
      memoryUsedMiB: 0,
      computeCapability: "9.0",
      eccUncorrectedVolatile: 0,
      migEnabled: false,
      utilizationPct: 0,
    });
    expect(g.uuid).toStartWith("GPU-");
    expect(gpuClass(g.name, g.memoryTotalMiB)).toBe("h200-140g");
    const load = parseCapture("h200", "load").gpus[0]!;
    expect(load.utilizationPct).toBe(100);
    expect(load.memoryUsedMiB).toBe(32362);
  });

  test("H100 80GB HBM3: 81,559 MiB is class h100-80g", () => {
    const g = parseCapture("h100", "load").gpus[0]!;
    expect(g).toMatchObject({ name: "NVIDIA H100 80GB HBM3", memoryTotalMiB: 81559, memoryUsedMiB: 19818, utilizationPct: 100, migEnabled: false });
    expect(gpuClass(g.name, g.memoryTotalMiB)).toBe("h100-80g");
  });

  test("H100 with MIG: utilisation [N/A] is absent (not 0) and the GPU is flagged mig_enabled", () => {
    for (const phase of ["idle", "load"] as const) {
      const g = parseCapture("mig", phase).gpus[0]!;
      expect(g.utilizationPct).toBeUndefined();
      expect(g.migEnabled).toBe(true);
      expect(gpuHealth(g, [], () => false).reasons).toEqual(["mig_enabled"]);
    }
  });

  test("RTX 2080 SUPER full of [N/A]: no ECC means unknown, not zero errors", () => {
    const g = parseCapture("rtx", "load").gpus[0]!;
    expect(g).toMatchObject({ name: "NVIDIA GeForce RTX 2080 SUPER", memoryTotalMiB: 8192, computeCapability: "7.5", utilizationPct: 8 });
    expect(g.eccUncorrectedVolatile).toBeUndefined();
    expect(g.eccCorrectedVolatile).toBeUndefined();
    expect(g.migEnabled).toBeUndefined();
    expect(gpuClass(g.name, g.memoryTotalMiB)).toBe("rtx-2080-super-8g");
    expect(gpuHealth(g, undefined, () => false)).toEqual({ ok: true, reasons: [], foreignProcesses: null });
  });

  test("every bracketed or bare N/A form is absent; a name with a comma survives", () => {
    const fields = ["index", "uuid", "name", "memory.total", "memory.used", "compute_cap", "utilization.gpu"];
    const text = ["0, GPU-a, NVIDIA X, 1024, [N/A], [Not Supported], N/A", "1, GPU-b, Acme, Inc. Card, 2048, [Unknown Error], 8.9, ", "garbage"].join("\n");
    const p = parseGpuCsv(text, fields);
    expect(p.gpus[0]).toMatchObject({ memoryTotalMiB: 1024, memoryUsedMiB: undefined, computeCapability: undefined, utilizationPct: undefined });
    expect(p.gpus[1]).toMatchObject({ name: "Acme, Inc. Card", memoryTotalMiB: 2048, memoryUsedMiB: undefined, computeCapability: "8.9" });
    expect(p.malformed).toEqual(["garbage"]);
  });

  test("reads the rejected field from an old driver's error", () => {
    expect(rejectedFields('Field "utilization.gpu" is not a valid field to query.\n')).toEqual(["utilization.gpu"]);
    expect(rejectedFields("NVIDIA-SMI has failed")).toEqual([]);
  });

  test("compute apps: pids and memory; [N/A] memory is absent", () => {
    expect(parseComputeAppsCsv("GPU-a, 11327, 2566\nGPU-a, 42, [N/A]\n")).toEqual([
      { gpuUuid: "GPU-a", pid: 11327, usedMemoryMiB: 2566 },
      { gpuUuid: "GPU-a", pid: 42, usedMemoryMiB: undefined },
    ]);
  });
});

describe("GPU class rule", () => {
  test("size from the driver in whole GiB, family from the name", () => {
    expect(gpuClass("NVIDIA L40S", 46068)).toBe("l40s-45g"); // 44.99 GiB
    expect(gpuClass("NVIDIA A100-SXM4-80GB", 81920)).toBe("a100-sxm4-80g");
    expect(gpuClass("Tesla T4", 15360)).toBe("t4-15g");
    expect(gpuClass("NVIDIA H100 80GB HBM3", undefined)).toBe("h100-unknown");
    expect(gpuFamily("NVIDIA H200 NVL")).toBe("h200-nvl");
  });

  test("compute capability comparison; unknown is not enough", () => {
    expect(computeCapabilityAtLeast("8.9", 8, 9)).toBe(true);
    expect(computeCapabilityAtLeast("9.0", 8, 9)).toBe(true);
    expect(computeCapabilityAtLeast("8.6", 8, 9)).toBe(false);
    expect(computeCapabilityAtLeast("10.0", 8, 9)).toBe(true);
    expect(computeCapabilityAtLeast(undefined, 8, 9)).toBe(false);
  });
});

describe("GPU health", () => {
  const base = {
    index: 0,
    uuid: "GPU-a",
    name: "x",
    memoryTotalMiB: 1,
    memoryUsedMiB: 1,
    computeCapability: "9.0",
    eccCorrectedVolatile: 0,
    migEnabled: false,
    utilizationPct: 0,
  };
  test("uncorrected ECC errors and foreign processes are flagged; our own pids are not", () => {
    const apps = [
      { gpuUuid: "GPU-a", pid: 100, usedMemoryMiB: 500 },
      { gpuUuid: "GPU-a", pid: 200, usedMemoryMiB: 700 },
      { gpuUuid: "GPU-b", pid: 300, usedMemoryMiB: 900 },
    ];
    const h = gpuHealth({ ...base, eccUncorrectedVolatile: 2 }, apps, (pid) => pid === 100);
    expect(h.ok).toBe(false);
    expect(h.reasons).toEqual(["ecc_uncorrected", "foreign_process"]);
    expect(h.foreignProcesses).toEqual([{ pid: 200, usedMemoryMiB: 700 }]);
    expect(gpuHealth({ ...base, eccUncorrectedVolatile: 0 }, apps.slice(0, 1), (pid) => pid === 100).ok).toBe(true);
  });
});

describe("discovery through an nvidia-smi executable", () => {
  test("an old driver that rejects utilization.gpu: retried without it, GPUs listed, utilisation null", async () => {
    const h100 = rows("h100", "load");
    const fake = writeFakeNvidiaSmi(join(tmp, "old"), { gpus: [h100[0]!, { ...h100[0]!, index: "1", uuid: "GPU-1" }], unknownFields: ["utilization.gpu"] });
    const d = await discoverGpus(fake);
    expect(d.nvidiaSmiFound).toBe(true);
    expect(d.droppedFields).toEqual(["utilization.gpu"]);
    expect(d.gpus.map((g) => g.index)).toEqual([0, 1]);
    expect(d.gpus.every((g) => g.utilizationPct === undefined && g.memoryTotalMiB === 81559)).toBe(true);
  });

  test("the same rows with a current driver keep utilisation", async () => {
    const fake = writeFakeNvidiaSmi(join(tmp, "new"), { gpus: rows("h200", "load"), apps: [] });
    const d = await discoverGpus(fake);
    expect(d.droppedFields).toEqual([]);
    expect(d.gpus[0]?.utilizationPct).toBe(100);
    expect(d.computeApps).toEqual([]);
  });

  test("a failing process query leaves the foreign-process flag unknown", async () => {
    const fake = writeFakeNvidiaSmi(join(tmp, "apps-fail"), { gpus: rows("h200", "idle"), apps: "fail" });
    const d = await discoverGpus(fake);
    expect(d.gpus).toHaveLength(1);
    expect(d.computeApps).toBeUndefined();
  });

  test("no nvidia-smi at all is a node with zero GPUs", async () => {
    const d = await discoverGpus(join(tmp, "does-not-exist", "nvidia-smi"));
    expect(d).toMatchObject({ gpus: [], nvidiaSmiFound: false });
    expect(d.note).toContain("zero GPUs");
    const onPath = await discoverGpus("llmgw-no-such-nvidia-smi");
    expect(onPath.nvidiaSmiFound).toBe(false);
  });
});
