/** Band flow limits from pool saturation: the static ceiling, and work-conserving lending of room the higher bands leave unused. */
import { describe, expect, test } from "bun:test";
import { bandLimits, CapacityLearner, type PoolMember, poolSaturation } from "../../src/admission/pool-saturation.ts";
import { PoolTable, UNLIMITED } from "../../src/shared/endpoint-table.ts";

const opts = { headroom: 0, staleMetrics: "ignore" as const };
const member = (index: number, over: Partial<PoolMember> = {}): PoolMember => ({ index, ready: true, inflight: 0, kvUsage: 0.1, stale: false, ...over });
const cap32 = () => 32;
/** Three engines of 32: room 96. */
const pool = [member(0), member(1), member(2)];

describe("band limits", () => {
  test("static: ⌈ceiling × room⌉, unlimited above 1, 0 when KV alone reaches the ceiling or nothing is ready", () => {
    expect(bandLimits(pool, cap32, opts, [2, 1, 0.6, 0], UNLIMITED)).toEqual([UNLIMITED, 96, 58, 0]);
    expect(
      bandLimits(
        pool.map((m) => ({ ...m, kvUsage: 0.7 })),
        cap32,
        opts,
        [2, 1, 0.6],
        UNLIMITED,
      ),
    ).toEqual([UNLIMITED, 96, 0]);
    expect(
      bandLimits(
        pool.map((m) => ({ ...m, ready: false })),
        cap32,
        opts,
        [2, 1, 0.6],
        UNLIMITED,
      ),
    ).toEqual([0, 0, 0]);
    // Headroom widens the room: 96 × 1.25 = 120.
    expect(bandLimits(pool, cap32, { ...opts, headroom: 0.25 }, [1, 0.5], UNLIMITED)).toEqual([120, 60]);
  });

  test("a band may flow exactly while saturation is below its ceiling (the limit agrees with poolSaturation)", () => {
    for (const ceiling of [0.3, 0.6, 0.95, 1]) {
      const [limit] = bandLimits(pool, cap32, opts, [ceiling], UNLIMITED);
      const at = (held: number) =>
        poolSaturation(
          pool.map((m, i) => ({ ...m, inflight: i === 0 ? held : 0 })),
          cap32,
          opts,
        );
      expect(at(limit! - 1)).toBeLessThan(ceiling);
      expect(at(limit!)).toBeGreaterThanOrEqual(ceiling);
    }
  });

  test("work-conserving: the room higher bands left unused is lent, never what they recently needed", () => {
    // The top band (never waits) peaked at 3 lately: batch leaves it ⌈3 × 1.25⌉ + 1 = 5 places (the test passes the reserve: any number will do).
    expect(bandLimits(pool, cap32, opts, [2, 0.6], UNLIMITED, [2, 6])).toEqual([UNLIMITED, 90]);
    // A burst of 60 above: the lent room shrinks back to the ceiling's share, never below it.
    expect(bandLimits(pool, cap32, opts, [2, 0.6], UNLIMITED, [2, 77])).toEqual([UNLIMITED, 58]);
    // KV: the band's KV bound rises with what it may use (1 − 6/96 ≈ 0.94), not past it.
    expect(
      bandLimits(
        pool.map((m) => ({ ...m, kvUsage: 0.8 })),
        cap32,
        opts,
        [2, 0.6],
        UNLIMITED,
        [2, 6],
      ),
    ).toEqual([UNLIMITED, 90]);
    expect(
      bandLimits(
        pool.map((m) => ({ ...m, kvUsage: 0.95 })),
        cap32,
        opts,
        [2, 0.6],
        UNLIMITED,
        [2, 6],
      ),
    ).toEqual([UNLIMITED, 0]);
    // A parked band (ceiling 0) never flows, lent room or not.
    expect(bandLimits(pool, cap32, opts, [2, 0], UNLIMITED, [2, 2])).toEqual([UNLIMITED, 0]);
  });

  test("learned capacity is the high-water mark of running, at least the initial guess, and starts afresh for a new endpoint", () => {
    const l = new CapacityLearner(2, 8);
    expect(l.capacity(0)).toBe(8);
    l.observe(0, 30);
    l.observe(0, 12);
    expect(l.capacity(0)).toBe(30);
    l.reset(0);
    expect(l.capacity(0)).toBe(8);
  });
});

describe("pool table: per-band hold and peak", () => {
  test("claims count per band, the peak is the most held since the last take, and restarts from the current hold", () => {
    const t = new PoolTable(1, 2);
    t.setLimit(0, 0, UNLIMITED);
    t.setLimit(0, 1, 2);
    for (let i = 0; i < 5; i++) expect(t.tryClaim(0, 0)).toBe(true);
    expect(t.tryClaim(0, 1)).toBe(false); // the pool holds 5, over band 1's limit of 2
    for (let i = 0; i < 4; i++) t.release(0, 0);
    expect(t.bandHeldNow(0, 0)).toBe(1);
    expect(t.takeBandPeak(0, 0)).toBe(5);
    expect(t.takeBandPeak(0, 0)).toBe(1);
    t.take(0, 1);
    expect(t.held(0)).toBe(2);
    expect(t.bandPeakNow(0, 1)).toBe(1);
  });
});
