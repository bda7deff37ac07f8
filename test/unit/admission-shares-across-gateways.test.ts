/** Admission across gateways (issue 14): shares follow demand and add up to 1; the scheduler publishes its band limits scaled by its share; unlimited and closed bands stay so. */
import { describe, expect, test } from "bun:test";
import { EndpointChooser } from "../../src/admission/chooser.ts";
import { AdmissionController } from "../../src/admission/controller.ts";
import { EndpointDirectory } from "../../src/admission/endpoint-directory.ts";
import { buildConfig } from "../../src/config/load.ts";
import { SchedulingProfile } from "../../src/scheduling/profile.ts";
import { AdmissionStatsTable, EndpointTable, F, I, PoolTable, UNLIMITED } from "../../src/shared/endpoint-table.ts";
import { PoolShareTable, scaleLimit } from "../../src/shared/pool-shares.ts";
import { computeShares, DEMAND_FLOOR, type GatewayDemand } from "../../src/shared-state/demand-shares.ts";

describe("demand shares", () => {
  test("proportional to demand plus a floor, the same figures give shares that add up to 1; alone: 1", () => {
    const demands: GatewayDemand[] = [
      { gateway: "a", pools: { default: 30, big: 0 } },
      { gateway: "b", pools: { default: 9 } },
      { gateway: "c", pools: { default: 0, big: 2 } },
    ];
    const shares = ["a", "b", "c"].map((g) => computeShares(g, demands, ["default", "big"]));
    expect(shares[0]!.default).toBeCloseTo((30 + DEMAND_FLOOR) / (39 + 3 * DEMAND_FLOOR), 9);
    for (const pool of ["default", "big"]) expect(shares.reduce((s, x) => s + x[pool]!, 0)).toBeCloseTo(1, 9);
    // All idle: an even split. Alone (or only this gateway published): everything.
    expect(
      computeShares(
        "a",
        [
          { gateway: "a", pools: {} },
          { gateway: "b", pools: {} },
        ],
        ["default"],
      ).default,
    ).toBeCloseTo(0.5, 9);
    expect(computeShares("a", [{ gateway: "a", pools: { default: 5 } }], ["default"])).toEqual({ default: 1 });
    expect(computeShares("a", [], ["default"])).toEqual({ default: 1 });
    // Garbage from another gateway counts as no demand.
    const junk = [
      { gateway: "a", pools: { default: 1 } },
      { gateway: "b", pools: { default: Number.NaN } },
    ];
    expect(computeShares("a", junk, ["default"]).default).toBeCloseTo(2 / 3, 9);
  });

  test("the share table holds (0, 1]; a limit scales up to whole places, 0 and unlimited stay", () => {
    const t = new PoolShareTable(2);
    expect(t.get(0)).toBe(1);
    t.set(0, 0.25);
    t.set(1, 0);
    expect(t.get(0)).toBe(0.25);
    expect(t.get(1)).toBeGreaterThan(0);
    expect(new PoolShareTable(2, t.buffer).get(0)).toBe(0.25); // the worker's view of the same memory
    expect(t.get(7)).toBe(1);
    expect([
      scaleLimit(96, 0.25, UNLIMITED),
      scaleLimit(3, 0.1, UNLIMITED),
      scaleLimit(0, 0.5, UNLIMITED),
      scaleLimit(UNLIMITED, 0.5, UNLIMITED),
      scaleLimit(96, 1, UNLIMITED),
    ]).toEqual([24, 1, 0, UNLIMITED, 96]);
  });
});

describe("the scheduler publishes limits scaled by the share", () => {
  test("a third of each band's places, the never-waiting band still unlimited", () => {
    const config = buildConfig({
      endpoints: [0, 1, 2].map((i) => ({ id: `e${i}`, url: `http://127.0.0.1:${9000 + i}`, models: ["m"] })),
      admission: { initial_capacity: 32, headroom: 0, work_conserving: false },
    });
    const bands = config.admission.bands.length;
    const table = new EndpointTable(4);
    const pools = new PoolTable(1, bands);
    const directory = new EndpointDirectory([0, 1, 2].map((i) => ({ index: i, id: `e${i}`, pool: 0, poolName: "default", models: ["m"] })));
    const now = 1_000_000;
    for (const i of [0, 1, 2]) {
      table.setInt(i, I.READY, 1);
      table.setFloat(i, F.KV_USAGE, 0.1);
      table.setFloat(i, F.METRICS_AT, now);
    }
    const shares = new PoolShareTable(1);
    const chooser = new EndpointChooser(table, directory, new SchedulingProfile(config.scheduling), 60_000);
    const controller = new AdmissionController(
      table,
      pools,
      new AdmissionStatsTable(bands, 1),
      directory,
      chooser,
      config.admission,
      60_000,
      undefined,
      shares,
    );
    controller.refresh(now);
    const limits = () => config.admission.bands.map((_, b) => pools.limit(0, b));
    expect(limits()).toEqual([UNLIMITED, 96, 58]); // interactive (ceiling 2), standard (1 × 96), batch (0.6 × 96)
    shares.set(0, 1 / 3);
    controller.refresh(now);
    expect(limits()).toEqual([UNLIMITED, 32, 20]);
  });
});
