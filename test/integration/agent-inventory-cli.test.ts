/**
 * Scenario: `llmgw agent inventory` on a node described by fixtures (fake
 * nvidia-smi over the MIG and H200 captures, the procfs sysfs sample) prints
 * what the scheduler would see, as JSON and as a table; a node without
 * nvidia-smi prints zero GPUs and exits 0.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { childEnv } from "../../src/shared/process-env.ts";
import { capturedGpuRows } from "../fixtures/agent/captures.ts";
import { unpackTtar, writeFakeNvidiaSmi } from "../fixtures/agent/fake-tools.ts";
import { sharedFixture } from "../helpers/fixtures.ts";
import { CLI, REPO_ROOT } from "../helpers/processes.ts";

const tmp = mkdtempSync(join(tmpdir(), "agent-inv-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

async function llmgw(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([process.execPath, CLI, ...args], { cwd: REPO_ROOT, env: childEnv(), stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

describe("llmgw agent inventory", () => {
  const h200 = capturedGpuRows(sharedFixture("nvidia-smi-capture__linux-x86_64__nvidia-h200__590.48.01.txt"), "load")[0]!;
  const mig = capturedGpuRows(sharedFixture("nvidia-smi-capture__linux-x86_64__nvidia-h100-mig__590.48.01.txt"), "idle")[0]!;
  const nvidiaSmi = writeFakeNvidiaSmi(join(tmp, "bin"), { gpus: [h200, { ...mig, index: "1", uuid: "GPU-mig" }], unknownFields: ["utilization.gpu"] });
  const sysfs = join(tmp, "ib");
  unpackTtar(sharedFixture("sysfs-class-infiniband__procfs-fixtures-excerpt.ttar"), sysfs, "fixtures/sys/class/infiniband");

  test("--json: GPUs with class, memory, capability, utilisation null on an old driver, health; fabric adapters", async () => {
    const r = await llmgw(["agent", "inventory", "--nvidia-smi", nvidiaSmi, "--sysfs-root", sysfs, "--json"]);
    expect(r.code).toBe(0);
    const inv = JSON.parse(r.stdout) as {
      gpus: {
        index: number;
        uuid: string;
        name: string;
        class: string;
        memoryTotalMiB: number;
        computeCapability: string;
        utilizationPct: number | null;
        health: { ok: boolean; reasons: string[] };
      }[];
      fabric: { adapters: { name: string }[]; island: string };
      nvidiaSmi: { droppedFields: string[] };
    };
    expect(inv.gpus.map((g) => [g.index, g.class, g.memoryTotalMiB, g.computeCapability, g.utilizationPct, g.health.reasons])).toEqual([
      [0, "h200-140g", 143771, "9.0", null, []],
      [1, "h100-80g", 81559, "9.0", null, ["mig_enabled"]],
    ]);
    expect(inv.nvidiaSmi.droppedFields).toEqual(["utilization.gpu"]);
    expect(inv.fabric.adapters.map((a) => a.name)).toEqual(["hfi1_0", "mlx4_0", "mlx5_0"]);
    expect(inv.fabric.island).toBe("fabric");
  });

  test("the table for people", async () => {
    const r = await llmgw(["agent", "inventory", "--nvidia-smi", nvidiaSmi, "--sysfs-root", sysfs]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("h200-140g");
    expect(r.stdout).toContain("140.40 GiB");
    expect(r.stdout).toContain("mig_enabled");
    expect(r.stdout).toContain("40 Gb/sec (4X QDR)");
  });

  test("no nvidia-smi, no InfiniBand: zero GPUs, a single-node island, exit 0", async () => {
    const r = await llmgw(["agent", "inventory", "--nvidia-smi", join(tmp, "missing"), "--sysfs-root", join(tmp, "missing-ib"), "--json"]);
    expect(r.code).toBe(0);
    const inv = JSON.parse(r.stdout) as { gpus: unknown[]; fabric: { island: string }; nvidiaSmi: { found: boolean; note: string } };
    expect(inv.gpus).toEqual([]);
    expect(inv.nvidiaSmi.found).toBe(false);
    expect(inv.fabric.island).toBe("single-node");
  });

  test("unknown flags are usage errors (exit 2)", async () => {
    expect((await llmgw(["agent", "inventory", "--bogus"])).code).toBe(2);
  });
});
