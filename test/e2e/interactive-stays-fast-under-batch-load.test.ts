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
 * taken over 240 probes a side from 3 clients, idle and loaded blocks
 * alternating. The verdict is on latencies net of the time each probe's
 * path (gateway, sim-engine, client) waited for a CPU: on a busy 2-core
 * machine the loaded gateway's event loop waits on a run queue for up to
 * seconds (measured: 0.4–1.5 s stalls, under 0.1 s of each on a CPU), which
 * once made the p99 2.37× with two probes in flight at one stall. Platinum
 * waiting behind bronze is no CPU wait: with admission off the net ratio
 * must still show it, in the same run.
 */
import { expect, test } from "bun:test";
import type { AdmissionBenchReport } from "../../src/bench/admission-scenario.ts";
import { runBenchJson } from "../helpers/bench-json.ts";

test("platinum stays within 1.25x of idle under 500 bronze streams with admission, and degrades past 10x without", async () => {
  // 240 probes from 3 clients: one machine-wide stall delays at most the 3
  // probes in flight, which a p99 of 240 does not rest on (with 120 probes
  // one stall could make the p99 by itself: ratio_on 1.93 once, three probes
  // late at one instant); the CPU-wait netting takes out the rest.
  const r = await runBenchJson<AdmissionBenchReport>(["admission", "--bronze", "500", "--probes", "240", "--probe-clients", "3"]);
  console.log(
    JSON.stringify({
      net: { ratio_on: r.ratio_on_net, total_ratio_on: r.total_ratio_on_net, ratio_off: r.ratio_off_net, total_ratio_off: r.total_ratio_off_net },
      raw: { ratio_on: r.ratio_on, total_ratio_on: r.total_ratio_on, ratio_off: r.ratio_off, total_ratio_off: r.total_ratio_off },
      throughput_ratio: r.throughput_ratio,
      learned: r.learned_capacity,
      slowest_idle: r.idle.slowest,
      slowest_loaded: r.on.slowest,
    }),
  );
  // Capacity was learned from the engines (32 slots each), not configured. A
  // scrape can catch an engine mid-step (some waiting, a few slots not yet
  // refilled), so a learned value may sit a little below the truth; never above.
  for (const c of r.learned_capacity) {
    expect(c).toBeGreaterThanOrEqual(24);
    expect(c).toBeLessThanOrEqual(32);
  }
  expect(r.idle.errors + r.on.errors + r.off.errors).toBe(0);
  expect(r.ratio_on_net).toBeLessThanOrEqual(1.25);
  expect(r.total_ratio_on_net).toBeLessThanOrEqual(1.25);
  expect(r.ratio_off_net).toBeGreaterThanOrEqual(10);
  expect(r.total_ratio_off_net).toBeGreaterThanOrEqual(10);
  // Bronze still made progress with admission on (it waits, it is not starved),
  // and admission did not idle the engines to protect platinum: bronze output
  // stays near what it is with no admission at all (work-conserving limits;
  // with the static 0.6 ceiling this ratio was about 0.6).
  expect(r.on.bronze_completed).toBeGreaterThan(100);
  expect(r.throughput_ratio).toBeGreaterThanOrEqual(0.8);
}, 240_000);
