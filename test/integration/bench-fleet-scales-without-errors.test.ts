/** `llmgw bench fleet` in small: two agents on simulated GPUs, a model scaled 1 → 4 → 1 under streaming load, every replica timed and counted, no error. */
import { expect, test } from "bun:test";
import { runFleetBench } from "../../src/bench/fleet-scenario.ts";

test("scale 1 → 4 → 1 under 8 streams: 4 replicas over both nodes, each served requests, 3 removed, 0 errors", async () => {
  const r = await runFleetBench({ clients: 8, maxTokens: 16, holdMs: 1_000, startupMs: 500, gpusPerNode: 2 });
  expect({ errors: r.errors, failures: r.first_failures }).toEqual({ errors: 0, failures: [] });
  expect(r.replicas).toHaveLength(4);
  expect(r.replicas.filter((x) => x.added === "start")).toHaveLength(1);
  expect(r.replicas.filter((x) => x.node === "node-a")).toHaveLength(2);
  expect(r.replicas.filter((x) => x.node === "node-b")).toHaveLength(2);
  expect(r.replicas.filter((x) => x.removed)).toHaveLength(3);
  for (const x of r.replicas) {
    expect(x.served).toBeGreaterThan(0);
    // A replica loads its weights for startup_ms before it can serve.
    expect(x.time_to_ready_ms).toBeGreaterThanOrEqual(500);
  }
  expect(r.requests).toBe(r.ok);
  const lastReady = Math.max(...r.replicas.filter((x) => x.added === "scale-up").map((x) => x.time_to_ready_ms));
  expect(r.scale_up_ms).toBeGreaterThanOrEqual(lastReady);
  expect(r.scale_up_ms).toBeLessThan(lastReady + 500);
}, 120_000);
