/**
 * The admission exit scenario, end to end with real processes: `llmgw bench
 * admission --json` itself (three sim-engines, a gateway, 500 bronze streams
 * running continuously). Platinum TTFT and total latency p99 stay within
 * 1.25× of idle with admission on, and the same load pushes them past 10×
 * with admission off — asserted both ways, so the test fails if admission
 * regresses and also if the load stops being a real load. Bronze throughput
 * with admission stays near its throughput without.
 *
 * The bench runs in its own process (a process started by `bun test` keeps
 * Bun's default of 256 outbound requests in flight), and its bronze load in
 * another, so the platinum timings carry no load-client queuing. p99 is
 * taken over 120 probes a side, idle and loaded blocks alternating, so one
 * stray scheduling hiccup on a shared 2-core machine is not the p99.
 */
import { expect, test } from "bun:test";
import type { AdmissionBenchReport } from "../../src/bench/admission-scenario.ts";
import { runBenchJson } from "../helpers/bench-json.ts";

test("platinum stays within 1.25x of idle under 500 bronze streams with admission, and degrades past 10x without", async () => {
  const r = await runBenchJson<AdmissionBenchReport>(["admission", "--bronze", "500"]);
  console.log(
    JSON.stringify({ ratio_on: r.ratio_on, total_ratio_on: r.total_ratio_on, ratio_off: r.ratio_off, total_ratio_off: r.total_ratio_off, throughput_ratio: r.throughput_ratio, learned: r.learned_capacity }),
  );
  // Capacity was learned from the engines (32 slots each), not configured. A
  // scrape can catch an engine mid-step (some waiting, a few slots not yet
  // refilled), so a learned value may sit a little below the truth; never above.
  for (const c of r.learned_capacity) {
    expect(c).toBeGreaterThanOrEqual(24);
    expect(c).toBeLessThanOrEqual(32);
  }
  expect(r.idle.errors + r.on.errors + r.off.errors).toBe(0);
  expect(r.ratio_on).toBeLessThanOrEqual(1.25);
  expect(r.total_ratio_on).toBeLessThanOrEqual(1.25);
  expect(r.ratio_off).toBeGreaterThanOrEqual(10);
  expect(r.total_ratio_off).toBeGreaterThanOrEqual(10);
  // Bronze still made progress with admission on (it waits, it is not starved),
  // and admission did not idle the engines to protect platinum: bronze output
  // stays near what it is with no admission at all (work-conserving limits;
  // with the static 0.6 ceiling this ratio was about 0.6).
  expect(r.on.bronze_completed).toBeGreaterThan(100);
  expect(r.throughput_ratio).toBeGreaterThanOrEqual(0.8);
}, 240_000);
