/**
 * `bench replay --twin`: a minute of the Azure 2023 conversation trace in
 * the fleet twin — every request answered as long as the trace's, spread
 * over the engines, the same report on a second run (run-timing fields
 * aside), and the timeline's clock simulated.
 */
import { expect, test } from "bun:test";
import { loadTrace, tracePath } from "../../src/bench/replay/trace-files.ts";
import { runReplay } from "../../src/bench/replay-scenario.ts";

async function replay() {
  const trace = loadTrace("azure-conv", tracePath("azure-conv")!);
  return await runReplay({
    trace,
    startS: 0,
    durationS: 60,
    speedup: 1,
    target: { kind: "twin", engines: 4, engineArgs: [] },
    slo: { ttftMs: 2000, tpotMs: 100 },
    percentiles: [99],
    drainS: 60,
  });
}

test("a minute of azure-conv in the twin: every request answered in full, spread over the engines, the same twice", async () => {
  const a = await replay();
  expect(a.target).toBe("twin");
  expect(a.failed).toBe(0);
  expect(a.completed).toBe(a.num_prompts);
  expect(a.short_answers).toBe(0);
  expect(a.endpoints.map((e) => e.id)).toEqual(["engine-0", "engine-1", "engine-2", "engine-3"]);
  for (const e of a.endpoints) expect(e.requests).toBeGreaterThan(a.num_prompts / 8);
  // An H100 · 8B engine under 3 requests a second: TTFT in tens of ms, TPOT a few ms.
  expect(a.median_ttft_ms).toBeGreaterThan(5);
  expect(a.median_ttft_ms).toBeLessThan(500);
  expect(a.median_tpot_ms).toBeGreaterThan(1);
  expect(a.median_tpot_ms).toBeLessThan(50);
  const b = await replay();
  const strip = (r: typeof a) => JSON.stringify({ ...r, date: undefined, commit: undefined, load_process_cpu_s: undefined, load_process_cpu_share: undefined });
  expect(strip(b)).toBe(strip(a));
}, 120_000);
