import { describe, expect, test } from "bun:test";
import { FILTER_NAMES, PICKER_NAMES, SCORER_NAMES } from "../../src/config/plugin-names.ts";
import { excludeTried } from "../../src/scheduling/filters/exclude.ts";
import { FILTERS, PICKERS, SCORERS } from "../../src/scheduling/plugin-registry.ts";
import { PrefixIndex } from "../../src/scheduling/prefix-index.ts";
import type { AdapterView, EndpointView, RequestView, SchedulingContext } from "../../src/scheduling/types.ts";
import { endpoint, kvIndexWith, schedulingContext, seeded } from "../helpers/scheduling.ts";

const adapter = (over: Partial<AdapterView> = {}): AdapterView => ({
  registered: true,
  running: false,
  waiting: false,
  resident: false,
  active: 0,
  runningAdapters: 0,
  maxLoras: 2,
  ...over,
});

/** A fleet with every awkward case: absent metrics, extremes, faults, other models. */
function awkwardFleet(): EndpointView[] {
  return [
    endpoint(0),
    endpoint(1, { waiting: undefined, running: undefined, kvUsage: undefined, adapter: adapter({ running: false, active: undefined, maxLoras: undefined }) }),
    endpoint(2, { waiting: 50, kvUsage: 1, inflight: 9, adapter: adapter({ running: true, waiting: true, active: 2 }) }),
    endpoint(3, { waiting: NaN, kvUsage: NaN, inflight: NaN, adapter: adapter({ registered: false, active: NaN, maxLoras: NaN }) }),
    endpoint(4, { waiting: 3, kvUsage: 1.5, inflight: 2, ready: false, adapter: adapter({ waiting: true, active: 5, maxLoras: 1 }) }),
    endpoint(5, {
      waiting: -1,
      kvUsage: -0.2,
      inflight: 0,
      draining: true,
      circuitOpen: true,
      adapter: adapter({ resident: true, active: -1, runningAdapters: -1, maxLoras: 0 }),
    }),
    endpoint(6, {
      waiting: Infinity,
      kvUsage: 0.5,
      inflight: Infinity,
      gpuFaulted: true,
      models: ["other"],
      adapter: adapter({ resident: true, active: 0, runningAdapters: NaN, maxLoras: Infinity }),
    }),
    endpoint(7, { waiting: undefined, kvUsage: 0.3, inflight: 1, adapter: adapter({ registered: false, running: true }) }),
  ];
}

const fleets: Record<string, () => EndpointView[]> = {
  empty: () => [],
  single: () => [endpoint(0)],
  "all absent": () => [0, 1, 2].map((i) => endpoint(i, { waiting: undefined, running: undefined, kvUsage: undefined })),
  "all equal": () => [0, 1, 2, 3].map((i) => endpoint(i, { waiting: 4, kvUsage: 0.5, inflight: 3 })),
  awkward: awkwardFleet,
};

function context(): SchedulingContext {
  const prefixIndex = new PrefixIndex(64);
  prefixIndex.record([11, 12, 13], 2);
  prefixIndex.record([11], 0);
  // Endpoints 0 and 2 publish KV events (2 holds more of the prompt); 7 holds blocks but its stream is not live.
  return schedulingContext(prefixIndex, kvIndexWith({ 0: [21], 2: [21, 22], 7: [21, 22, 23] }, [0, 2, 5]));
}

const requests: Record<string, RequestView> = {
  "no hashes": { model: "m", prefixHashes: [] },
  "with hashes": { model: "m", prefixHashes: [11, 12, 13, 14] },
  "with exclude": { model: "m", prefixHashes: [11], exclude: new Set([0, 3]) },
  "with token ids": { model: "m", prefixHashes: [11, 12], tokenBlockKeys: [21, 22, 23, 24] },
  "token ids, no hashes": { model: "m", prefixHashes: [], tokenBlockKeys: [21] },
  "with adapter": { model: "m", prefixHashes: [11, 12], adapter: 3 },
  "with adapter and token ids": { model: "m", prefixHashes: [11, 12], tokenBlockKeys: [21, 22], adapter: 3 },
};

describe("registry", () => {
  test("has exactly the config's names, and each plugin carries its own name", () => {
    expect(Object.keys(FILTERS).sort()).toEqual([...FILTER_NAMES].sort());
    expect(Object.keys(SCORERS).sort()).toEqual([...SCORER_NAMES].sort());
    expect(Object.keys(PICKERS).sort()).toEqual([...PICKER_NAMES].sort());
    for (const [name, f] of Object.entries(FILTERS)) expect(f.name).toBe(name);
    for (const [name, s] of Object.entries(SCORERS)) expect(s.name).toBe(name);
    for (const [name, p] of Object.entries(PICKERS)) expect(p.name).toBe(name);
  });
});

describe("filter conformance", () => {
  const all = [...Object.values(FILTERS), excludeTried];
  for (const f of all) {
    for (const [fleetName, make] of Object.entries(fleets)) {
      for (const [reqName, req] of Object.entries(requests)) {
        test(`${f.name} on ${fleetName} fleet, ${reqName}: a subset in the original order, input untouched`, () => {
          const fleet = make();
          const before = [...fleet];
          const kept = f.filter(req, fleet, context());
          expect(fleet).toEqual(before);
          let cursor = 0;
          for (const e of kept) {
            const at = fleet.indexOf(e, cursor);
            expect(at).toBeGreaterThanOrEqual(cursor); // member, and order preserved
            cursor = at + 1;
          }
          expect(f.filter(req, fleet, context())).toEqual(kept); // deterministic
        });
      }
    }
  }

  test("every filter drops something on the awkward fleet (so the checks above see both outcomes)", () => {
    const fleet = awkwardFleet();
    for (const f of Object.values(FILTERS)) expect(f.filter(requests["with adapter"]!, fleet, context()).length).toBeLessThan(fleet.length);
    expect(excludeTried.filter(requests["with exclude"]!, fleet, context()).map((e) => e.index)).toEqual([1, 2, 4, 5, 6, 7]);
  });
});

describe("scorer conformance", () => {
  for (const s of Object.values(SCORERS)) {
    for (const [fleetName, make] of Object.entries(fleets)) {
      for (const [reqName, req] of Object.entries(requests)) {
        test(`${s.name} on ${fleetName} fleet, ${reqName}: one finite score in [0,1] per endpoint, deterministic`, () => {
          const fleet = make();
          const scores = s.score(req, fleet, context());
          expect(scores).toHaveLength(fleet.length);
          for (const v of scores) {
            expect(Number.isFinite(v)).toBe(true);
            expect(v).toBeGreaterThanOrEqual(0);
            expect(v).toBeLessThanOrEqual(1);
          }
          expect(s.score(req, fleet, context())).toEqual(scores);
        });
      }
    }
  }

  test("an endpoint with absent metrics never outscores a known idle one", () => {
    const fleet = [
      endpoint(0, { waiting: 0, kvUsage: 0, inflight: 0 }),
      endpoint(1, { waiting: undefined, running: undefined, kvUsage: undefined, inflight: 0 }),
    ];
    for (const s of Object.values(SCORERS)) {
      const [known, absent] = s.score(requests["with hashes"]!, fleet, context());
      expect(absent!).toBeLessThanOrEqual(known!);
    }
    // The same for an adapter: an endpoint whose metrics are absent scores no more than a known one with room, whichever
    // of the two is the adapter's home.
    for (const [a, b] of [
      [0, 1],
      [5, 6],
      [11, 12],
    ]) {
      const withAdapter = [
        endpoint(a!, { waiting: 0, kvUsage: 0, inflight: 0, adapter: adapter() }),
        endpoint(b!, {
          waiting: undefined,
          running: undefined,
          kvUsage: undefined,
          inflight: 0,
          adapter: adapter({ resident: false, active: undefined, runningAdapters: undefined, maxLoras: undefined }),
        }),
      ];
      for (const s of Object.values(SCORERS)) {
        const [known, absent] = s.score(requests["with adapter"]!, withAdapter, context());
        expect(absent!).toBeLessThanOrEqual(known!);
      }
    }
  });
});

describe("picker conformance", () => {
  const totalsFor: Record<string, (n: number) => number[]> = {
    distinct: (n) => Array.from({ length: n }, (_, i) => i / n),
    ties: (n) => Array.from({ length: n }, () => 1),
    "with NaN": (n) => Array.from({ length: n }, (_, i) => (i % 2 === 0 ? NaN : i)),
    "all NaN": (n) => Array.from({ length: n }, () => NaN),
  };
  for (const p of Object.values(PICKERS)) {
    test(`${p.name}: undefined for no candidates`, () => {
      expect(p.pick([], [], seeded(1))).toBeUndefined();
    });
    for (const [fleetName, make] of Object.entries(fleets)) {
      if (fleetName === "empty") continue;
      for (const [totalsName, totals] of Object.entries(totalsFor)) {
        test(`${p.name} on ${fleetName} fleet, ${totalsName} totals: a member, the same for the same seed`, () => {
          const fleet = make();
          const t = totals(fleet.length);
          const picks = Array.from({ length: 20 }, (_, seed) => p.pick(fleet, t, seeded(seed)));
          for (const e of picks) expect(fleet).toContain(e!);
          const again = Array.from({ length: 20 }, (_, seed) => p.pick(fleet, t, seeded(seed)));
          expect(again).toEqual(picks);
        });
      }
    }
    test(`${p.name}: survives a random source that returns exactly 1`, () => {
      const fleet = [endpoint(0), endpoint(1)];
      expect(fleet).toContain(p.pick(fleet, [1, 1], () => 1)!);
    });
  }
});
