/**
 * `llmgw bench replay --check` on 20 s of the Azure 2023 conversation
 * trace: the window replayed onto sim-engine processes behind a real
 * gateway, then in the fleet twin, one engine killed at 8 s and started
 * again 6 s later in both (a SIGKILL of its process; the twin's kill).
 * Both answer every request in full, both gateways take the engine out of
 * rotation within a second and put it back once it is up; the twin's
 * output tokens a second and its time per output token are the real-time
 * run's. TTFT is shown, not held here (a first token shows every
 * millisecond of a busy host; `bench replay --check` on an idle host
 * measures it, docs/fleet-twin.md).
 */
import { expect, test } from "bun:test";
import type { ReplayReport } from "../../src/bench/replay/replay-report.ts";
import { runBenchJson } from "../helpers/bench-json.ts";

interface CheckReport {
  scenario: string;
  real: ReplayReport;
  twin: ReplayReport;
  check: {
    tolerance: number;
    figures: { name: string; held: boolean; real: number; twin: number; error: number }[];
    met: boolean;
    failures?: { real: Failures; twin: Failures };
  };
}

interface Failures {
  refused: number;
  broken: number;
  faults: { outAtMs: number | null; backAtMs: number | null; atMs: number }[];
}

test("the twin and the real-time stack replay the same window alike: every request answered, throughput and TPOT close", async () => {
  const r = await runBenchJson<CheckReport>(["replay", "--check", "--trace", "azure-conv", "--duration", "20", "--engines", "2", "--fault", "kill:1@8s+6s"]);
  expect(r.scenario).toBe("replay-twin-check");
  expect(r.real.target).toBe("llmgw");
  expect(r.twin.target).toBe("twin");
  for (const rep of [r.real, r.twin]) {
    expect(rep.failed).toBe(0);
    expect(rep.completed).toBe(rep.num_prompts);
    // Streams cut by the kill were continued elsewhere to their full length.
    expect(rep.short_answers).toBe(0);
  }
  for (const f of [r.check.failures!.real, r.check.failures!.twin]) {
    expect({ refused: f.refused, broken: f.broken }).toEqual({ refused: 0, broken: 0 });
    const kill = f.faults[0]!;
    expect(kill.outAtMs).not.toBeNull();
    expect(kill.outAtMs! - kill.atMs).toBeLessThan(1_000);
    expect(kill.backAtMs).not.toBeNull();
    expect(kill.backAtMs! - kill.atMs).toBeGreaterThanOrEqual(6_000);
  }
  const fig = (name: string) => r.check.figures.find((f) => f.name === name)!;
  expect(r.check.figures.filter((f) => f.held).map((f) => f.name)).toEqual(["output tok/s", "TTFT p50 ms", "TTFT p90 ms"]);
  // Every answer is as long as the trace's in both: output tokens a second differ only by when the last one ended.
  expect(Math.abs(fig("output tok/s").error)).toBeLessThan(0.1);
  // The engines' own step times, which a busy host stretches only a little at this load.
  expect(Math.abs(fig("TPOT p50 ms").error)).toBeLessThan(0.25);
  expect(fig("completed").error).toBe(0);
}, 180_000);
