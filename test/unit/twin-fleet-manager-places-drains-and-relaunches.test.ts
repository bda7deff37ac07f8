/**
 * A fleet of nodes in the twin: the control plane's own reconcile planner
 * places the replicas (spread across nodes), replaces a drained node's
 * replicas elsewhere before it stops them, and launches a killed replica
 * again, each new replica serving only after its start-up time.
 */
import { expect, test } from "bun:test";
import type { ScheduledRequest } from "../../src/bench/replay/open-loop-driver.ts";
import { runTwinOpenLoop } from "../../src/bench/replay/twin-open-loop.ts";
import { fleetModelSchema, toFleetModel } from "../../src/config/fleet-schema.ts";
import { parseTwinFaults } from "../../src/twin/faults.ts";
import { TwinFleet } from "../../src/twin/twin-fleet.ts";

const NODES = { count: 3, gpus: 2, gpuClass: "h100" };

/** 4 requests a second for `seconds`, 100 tokens out each. */
function requests(seconds: number): ScheduledRequest[] {
  return Array.from({ length: seconds * 4 }, (_, i) => ({ atMs: i * 250, segments: [{ key: `p${i % 40}`, tokens: 200 }], maxTokens: 100 }));
}

async function run(faults: string[], startupS: number, seconds = 120) {
  const spec = toFleetModel(fleetModelSchema.parse({ name: "m", engine: "sim", replicas: 4, startup_ms: startupS * 1000 }));
  const fleet = new TwinFleet({
    engines: 4,
    model: "m",
    engineFlags: ["--profile", "h100-llama-3.1-8b"],
    gateway: {},
    kvEvents: false,
    seed: 3,
    fleet: { spec, nodes: NODES },
  });
  const r = await runTwinOpenLoop(fleet, { requests: requests(seconds), drainMs: 60_000, faults: parseTwinFaults(faults, fleet.engines.length, NODES.count) });
  return { fleet, r, report: fleet.manager!.report() };
}

test("the first replicas serve from the start, spread across the nodes by the planner", async () => {
  const { r, report } = await run([], 60, 20);
  expect(r.records.every((rec) => rec.status === 200 && rec.error === undefined)).toBe(true);
  expect(report.launched).toBe(4);
  expect(report.serving.min).toBe(4);
  const creates = report.actions.filter((a) => a.kind === "create");
  expect(creates).toHaveLength(4);
  // 4 replicas of 1 GPU on 3 nodes of 2: spread first, so every node has one before any has two.
  const perNode = new Map<string, number>();
  for (const c of creates) perNode.set(c.node!, (perNode.get(c.node!) ?? 0) + 1);
  expect([...perNode.values()].sort()).toEqual([1, 1, 2]);
  // 4 GPUs held for the run (20 s of sends and the drain of the last answers).
  expect(report.gpu_hours).toBeGreaterThan((4 * 20) / 3600);
});

test("a drained node's replicas keep serving until their replacements elsewhere are up, then stop; no request fails", async () => {
  const { r, report } = await run(["drain-node:0@20s"], 30);
  expect(r.records.every((rec) => rec.status === 200 && rec.error === undefined)).toBe(true);
  const f = r.faults[0]!;
  // Replacements start up for 30 s before the originals may stop.
  expect(f.stoppedAtMs).not.toBeNull();
  expect(f.stoppedAtMs! - f.atMs).toBeGreaterThanOrEqual(30_000);
  expect(f.stoppedAtMs! - f.atMs).toBeLessThan(40_000);
  // The model never served fewer than its desired replicas during the drain.
  expect(report.serving.min).toBe(4);
  expect(report.serving.max).toBeGreaterThan(4);
  const stopped = report.actions.filter((a) => a.kind === "stop");
  expect(stopped.length).toBeGreaterThan(0);
  expect(report.launched).toBe(4 + stopped.length);
});

test("a killed replica is launched again by the planner and serves after its start-up time", async () => {
  for (const startupS of [10, 40]) {
    const { r, report } = await run(["kill:0@20s"], startupS);
    expect(r.records.every((rec) => rec.status === 200 && rec.error === undefined)).toBe(true);
    const f = r.faults[0]!;
    expect(f.endedAtMs).not.toBeNull();
    // Relaunched at the next reconcile (1 s) after the agent reports it gone, up after the start-up.
    expect(f.endedAtMs! - f.atMs).toBeGreaterThanOrEqual(startupS * 1000);
    expect(f.endedAtMs! - f.atMs).toBeLessThanOrEqual(startupS * 1000 + 2_500);
    expect(report.serving.min).toBe(3);
    expect(report.actions.some((a) => a.kind === "launch")).toBe(true);
  }
});

test("the same fleet and faults give the same run", async () => {
  const a = await run(["drain-node:1@15s+60s", "kill:2@30s"], 20, 60);
  const b = await run(["drain-node:1@15s+60s", "kill:2@30s"], 20, 60);
  expect(JSON.stringify(b.r.records)).toBe(JSON.stringify(a.r.records));
  expect(b.report).toEqual(a.report);
});
