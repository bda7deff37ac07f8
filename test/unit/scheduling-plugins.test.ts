import { describe, expect, test } from "bun:test";
import { FILTERS, PICKERS, SCORERS } from "../../src/scheduling/plugin-registry.ts";
import { PrefixIndex } from "../../src/scheduling/prefix-index.ts";
import type { EndpointView, RequestView, SchedulingContext } from "../../src/scheduling/types.ts";
import { endpoint, schedulingContext } from "../helpers/scheduling.ts";

const req: RequestView = { model: "m", prefixHashes: [] };
const ctx = (): SchedulingContext & { prefixIndex: PrefixIndex } => schedulingContext(new PrefixIndex(64));
const ids = (es: readonly EndpointView[]) => es.map((e) => e.id);

describe("filters", () => {
  const fleet = [
    endpoint(0),
    endpoint(1, { models: ["other", "m2"] }),
    endpoint(2, { ready: false }),
    endpoint(3, { draining: true }),
    endpoint(4, { circuitOpen: true }),
    endpoint(5, { gpuFaulted: true }),
  ];
  test.each([
    ["serves-model", ["e0", "e2", "e3", "e4", "e5"]],
    ["ready", ["e0", "e1", "e3", "e4", "e5"]],
    ["not-draining", ["e0", "e1", "e2", "e4", "e5"]],
    ["circuit-closed", ["e0", "e1", "e2", "e3", "e5"]],
    ["gpu-healthy", ["e0", "e1", "e2", "e3", "e4"]],
  ] as const)("%s drops exactly the endpoint it is about", (name, kept) => {
    expect(ids(FILTERS[name].filter(req, fleet, ctx()))).toEqual([...kept]);
  });

  test("serves-model matches the canonical model name exactly", () => {
    expect(ids(FILTERS["serves-model"].filter({ model: "m2", prefixHashes: [] }, fleet, ctx()))).toEqual(["e1"]);
    expect(FILTERS["serves-model"].filter({ model: "M", prefixHashes: [] }, fleet, ctx())).toEqual([]);
  });
});

describe("queue-depth", () => {
  const s = SCORERS["queue-depth"];
  test("prefers the less loaded: 1 - (w - min) / (max + 1)", () => {
    expect(s.score(req, [endpoint(0, { waiting: 0 }), endpoint(1, { waiting: 5 }), endpoint(2, { waiting: 11 })], ctx())).toEqual([1, 1 - 5 / 12, 1 - 11 / 12]);
  });
  test("all equal → all 1, at any load", () => {
    expect(s.score(req, [endpoint(0, { waiting: 3 }), endpoint(1, { waiting: 3 })], ctx())).toEqual([1, 1]);
    expect(s.score(req, [endpoint(0, { waiting: 0 }), endpoint(1, { waiting: 0 })], ctx())).toEqual([1, 1]);
  });
  test("the spread shrinks as load grows", () => {
    const [a, b] = s.score(req, [endpoint(0, { waiting: 0 }), endpoint(1, { waiting: 1 })], ctx());
    const [c, d] = s.score(req, [endpoint(0, { waiting: 10 }), endpoint(1, { waiting: 11 })], ctx());
    expect(a! - b!).toBeGreaterThan(c! - d!);
  });
  test("absent scores below every known endpoint, idle or loaded", () => {
    const [idle, absent, loaded] = s.score(req, [endpoint(0, { waiting: 0 }), endpoint(1, { waiting: undefined }), endpoint(2, { waiting: 70 })], ctx());
    expect(idle).toBe(1);
    expect(absent!).toBeLessThan(loaded!);
    expect(loaded!).toBeGreaterThan(0);
  });
});

describe("kv-cache", () => {
  const s = SCORERS["kv-cache"];
  test("1 - usage, clamped; absent scores as if full", () => {
    expect(
      s.score(req, [endpoint(0, { kvUsage: 0.25 }), endpoint(1, { kvUsage: 1.2 }), endpoint(2, { kvUsage: undefined }), endpoint(3, { kvUsage: 0 })], ctx()),
    ).toEqual([0.75, 0, 0, 1]);
  });
});

describe("inflight", () => {
  const s = SCORERS.inflight;
  test("fewer in flight is better; all equal → all 1", () => {
    expect(s.score(req, [endpoint(0, { inflight: 4 }), endpoint(1, { inflight: 1 }), endpoint(2, { inflight: 0 })], ctx())).toEqual([1 - 4 / 5, 1 - 1 / 5, 1]);
    expect(s.score(req, [endpoint(0), endpoint(1)], ctx())).toEqual([1, 1]);
    expect(s.score(req, [endpoint(0, { inflight: 7 }), endpoint(1, { inflight: 7 })], ctx())).toEqual([1, 1]);
  });
  test("a mix of endpoints with and without a free batch slot: every free one outscores every full one", () => {
    // 30 and 31 of 32 have a slot; 32 of 32 has none; 40 of 64 has many.
    const fleet = [
      endpoint(0, { inflight: 32, capacity: 32 }),
      endpoint(1, { inflight: 31, capacity: 32 }),
      endpoint(2, { inflight: 30, capacity: 32 }),
      endpoint(3, { inflight: 40, capacity: 64 }),
    ];
    const [full, almost, less, big] = s.score(req, fleet, ctx()) as [number, number, number, number];
    expect(full).toBeLessThan(0.5);
    for (const free of [almost, less, big]) expect(free).toBeGreaterThanOrEqual(0.5);
    expect(less).toBeGreaterThan(almost);
    // The plain formula, halved: 32 of 32 against min 30, max 40.
    expect(full).toBeCloseTo((1 - 2 / 41) / 2, 10);
  });
  test("all free, all full, or capacity unknown: the plain formula", () => {
    const plain = s.score(req, [endpoint(0, { inflight: 4 }), endpoint(1, { inflight: 1 })], ctx());
    expect(s.score(req, [endpoint(0, { inflight: 4, capacity: 8 }), endpoint(1, { inflight: 1, capacity: 8 })], ctx())).toEqual(plain);
    expect(s.score(req, [endpoint(0, { inflight: 4, capacity: 2 }), endpoint(1, { inflight: 1, capacity: 1 })], ctx())).toEqual(plain);
    expect(s.score(req, [endpoint(0, { inflight: 4, capacity: 4 }), endpoint(1, { inflight: 1 })], ctx())).toEqual([(1 - 3 / 5) / 2, 0.5 + 1 / 2]);
  });
});

describe("prefix-affinity", () => {
  const s = SCORERS["prefix-affinity"];
  const fleet = [endpoint(0), endpoint(1), endpoint(2)];
  test("prefers the endpoint that got the prefix before, in proportion to the blocks matched", () => {
    const c = ctx();
    c.prefixIndex.record([1, 2, 3, 4], 1);
    c.prefixIndex.record([1, 2, 9], 2);
    // Block 0 and 1 now last went to e2, but e1 still holds the whole 4-block prefix.
    expect(s.score({ model: "m", prefixHashes: [1, 2, 3, 4] }, fleet, c)).toEqual([0, 1, 0.5]);
    expect(s.score({ model: "m", prefixHashes: [1, 2, 3, 5] }, fleet, c)).toEqual([0, 0.75, 0.5]);
  });
  test("no hashes → 0 everywhere", () => {
    const c = ctx();
    c.prefixIndex.record([1], 0);
    expect(s.score(req, fleet, c)).toEqual([0, 0, 0]);
  });
});

describe("max-score", () => {
  const p = PICKERS["max-score"];
  const fleet = [endpoint(0), endpoint(1), endpoint(2), endpoint(3)];
  test("takes the single best without consulting random", () => {
    let calls = 0;
    const e = p.pick(fleet, [0.1, 2, 1.5, NaN], () => {
      calls++;
      return 0.99;
    });
    expect(e?.id).toBe("e1");
    expect(calls).toBe(0);
  });
  test("breaks ties within epsilon at random, never choosing a lower total", () => {
    const totals = [3, 3 - 1e-12, 2.5, 3];
    const seen = new Set<string>();
    for (let i = 0; i < 30; i++) seen.add(p.pick(fleet, totals, () => i / 30)!.id);
    expect([...seen].sort()).toEqual(["e0", "e1", "e3"]);
  });
});

describe("random picker", () => {
  test("reaches every candidate, ignoring totals", () => {
    const fleet = [endpoint(0), endpoint(1), endpoint(2)];
    const seen = new Set<string>();
    for (let i = 0; i < 30; i++) seen.add(PICKERS.random.pick(fleet, [10, 0, 0], () => i / 30)!.id);
    expect(seen.size).toBe(3);
  });
});

describe("round-robin picker", () => {
  const p = PICKERS["round-robin"];
  test("takes the candidates in turn, ignoring totals and the random source", () => {
    const fleet = [endpoint(0), endpoint(1), endpoint(2)];
    const ids = Array.from({ length: 7 }, (_, turn) => p.pick(fleet, [10, 0, 0], () => 0.99, turn)!.id);
    expect(ids).toEqual(["e0", "e1", "e2", "e0", "e1", "e2", "e0"]);
  });
  test("a turn that is not a count (absent, negative, NaN) is turn 0", () => {
    const fleet = [endpoint(0), endpoint(1)];
    for (const turn of [undefined, -3, NaN, 1.5, Infinity]) expect(p.pick(fleet, [0, 0], () => 0.5, turn)!.id).toBe("e0");
  });
});
