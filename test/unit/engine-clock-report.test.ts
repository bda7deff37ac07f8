import { describe, expect, test } from "bun:test";
import { type ClockSample, engineClockCell, engineClockReport, engineClocksLine, strictVerdict } from "../../src/bench/engine-clock-report.ts";
import { type CommandSpec, parseCommandArgs } from "../../src/shared/flags.ts";

const STRICT_SPEC: CommandSpec = { name: "t", summary: "", usage: "", options: { strict: { type: "boolean" } }, run: async () => 0 };

/** An engine's clock series: cumulative counts at 1 ms, 10 ms, 100 ms and +Inf, slipped seconds, sampled at `atMs`. */
const sample = (atMs: number, counts: [number, number, number, number], slippedS: number): ClockSample => ({
  atMs,
  late: new Map([
    [0.001, counts[0]],
    [0.01, counts[1]],
    [0.1, counts[2]],
    [Infinity, counts[3]],
  ]),
  slippedS,
});

describe("engine clock report", () => {
  test("engines whose timers ran within a millisecond and whose schedule held kept their clock", () => {
    const before = [sample(0, [10, 10, 10, 10], 0), sample(0, [5, 5, 5, 5], 0.001)];
    const after = [sample(10_000, [1010, 1010, 1010, 1010], 0.01), sample(10_000, [1005, 1005, 1005, 1005], 0.011)];
    const r = engineClockReport(before, after);
    expect(r.engines).toBe(2);
    expect(r.timers).toBe(2000);
    expect(r.late_p99_ms).toBeLessThanOrEqual(1);
    expect(r.slipped_share_max).toBeCloseTo(0.001, 4);
    expect(r.kept).toBe(true);
    expect(engineClocksLine([{ name: "a", clock: r }])).toStartWith("engines kept their clock");
  });

  test("one engine whose schedule slipped 5 % of the run fell behind, and the line names the run", () => {
    const before = [sample(0, [0, 0, 0, 0], 0), sample(0, [0, 0, 0, 0], 0)];
    const after = [sample(20_000, [1000, 1000, 1000, 1000], 0), sample(20_000, [1000, 1000, 1000, 1000], 1)];
    const r = engineClockReport(before, after);
    expect(r.slipped_share_max).toBeCloseTo(0.05, 4);
    expect(r.kept).toBe(false);
    expect(engineClockCell(r)).toEndWith("BEHIND");
    expect(engineClocksLine([{ name: "random", clock: r }])).toContain("random");
  });

  test("timers late past the limit at p99 fell behind even with no slip", () => {
    // 3 % of the timers ran 10–100 ms late.
    const r = engineClockReport([sample(0, [0, 0, 0, 0], 0)], [sample(10_000, [900, 970, 1000, 1000], 0)]);
    expect(r.late_p99_ms).toBeGreaterThan(10);
    expect(r.kept).toBe(false);
  });

  test("a server that is no sim-engine is not measured, and --strict does not fail on it", () => {
    const none: ClockSample = { atMs: 0, late: new Map(), slippedS: undefined };
    const r = engineClockReport([none], [{ ...none, atMs: 1000 }]);
    expect(r.engines).toBe(0);
    expect(engineClockCell(r)).toBe("—");
    expect(engineClocksLine([{ name: "x", clock: r }])).toBeUndefined();
    expect(strictVerdict(parseCommandArgs(STRICT_SPEC, ["--strict"]), [r])).toBe(0);
  });

  test("--strict exits 1 on engines that fell behind; without it the run still exits 0", () => {
    const behind = engineClockReport([sample(0, [0, 0, 0, 0], 0)], [sample(1000, [10, 10, 10, 10], 0.5)]);
    expect(strictVerdict(parseCommandArgs(STRICT_SPEC, ["--strict"]), [undefined, behind])).toBe(1);
    expect(strictVerdict(parseCommandArgs(STRICT_SPEC, []), [behind])).toBe(0);
  });
});
