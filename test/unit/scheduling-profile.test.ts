import { describe, expect, test } from "bun:test";
import { FILTERS, PICKERS, SCORERS } from "../../src/scheduling/plugin-registry.ts";
import { prefixHashes } from "../../src/scheduling/prefix-hash.ts";
import { type SchedulingConfig, SchedulingProfile } from "../../src/scheduling/profile.ts";
import type { RequestView, Scorer } from "../../src/scheduling/types.ts";
import { endpoint, seeded } from "../helpers/scheduling.ts";

/** The config schema's defaults. */
const DEFAULTS: SchedulingConfig = {
  filters: ["serves-model", "ready", "not-draining", "circuit-closed", "gpu-healthy"],
  scorers: [
    { name: "queue-depth", weight: 2 },
    { name: "kv-cache", weight: 1 },
    { name: "inflight", weight: 2 },
    { name: "prefix-affinity", weight: 3 },
  ],
  picker: "max-score",
  prefixAffinity: { blockChars: 32, maxBlocks: 8, lruEntries: 10_000 },
  cacheAffinity: { threshold: 0.8, peakPrefillTokensPerS: 15_928, maxTtftPenaltyMs: 18_000 },
};

describe("SchedulingProfile", () => {
  test("load alone never sends a request to an engine whose slots are all taken while another has one free, whatever a poll-old queue depth says", () => {
    const p = new SchedulingProfile(DEFAULTS);
    // Seen under bench admission: sim-1 and sim-2 at 33 of 32 in flight, sim-3 at 27 of 32 but its last poll
    // (taken while a wave of requests was being admitted) said 6 waiting and more KV in use.
    const fleet = [
      endpoint(0, { inflight: 33, capacity: 32, waiting: 0, kvUsage: 0.016 }),
      endpoint(1, { inflight: 33, capacity: 32, waiting: 0, kvUsage: 0.012 }),
      endpoint(2, { inflight: 27, capacity: 32, waiting: 6, kvUsage: 0.4 }),
    ];
    for (let seed = 1; seed <= 5; seed++) expect(p.schedule({ model: "m", prefixHashes: [] }, fleet, seeded(seed)).endpoint?.id).toBe("e2");
  });

  test("exclude runs first, then each filter's drops are counted", () => {
    const p = new SchedulingProfile(DEFAULTS);
    const fleet = [endpoint(0), endpoint(1, { ready: false }), endpoint(2, { models: ["x"] }), endpoint(3, { gpuFaulted: true }), endpoint(4), endpoint(5)];
    const d = p.schedule({ model: "m", prefixHashes: [], exclude: new Set([0, 5]) }, fleet, seeded(1));
    expect(d.endpoint?.id).toBe("e4");
    expect(d.drops).toEqual({ exclude: 2, "serves-model": 1, ready: 1, "not-draining": 0, "circuit-closed": 0, "gpu-healthy": 1 });
  });

  test("no candidate left → undefined endpoint, empty scores, later filters report 0", () => {
    const p = new SchedulingProfile(DEFAULTS);
    const d = p.schedule({ model: "nope", prefixHashes: [1] }, [endpoint(0), endpoint(1, { ready: false })], seeded(1));
    expect(d.endpoint).toBeUndefined();
    expect(d.scores).toEqual({});
    expect(d.drops).toEqual({ exclude: 0, "serves-model": 2, ready: 0, "not-draining": 0, "circuit-closed": 0, "gpu-healthy": 0 });
    expect(p.prefixIndex.size).toBe(0);
  });

  test("weighted totals decide, and the chosen endpoint's unweighted scores are reported", () => {
    const p = new SchedulingProfile({
      ...DEFAULTS,
      scorers: [
        { name: "queue-depth", weight: 1 },
        { name: "kv-cache", weight: 3 },
      ],
    });
    // e0: short queue but nearly full KV; e1: longer queue, empty KV. KV weighs more.
    const fleet = [endpoint(0, { waiting: 0, kvUsage: 0.9 }), endpoint(1, { waiting: 3, kvUsage: 0 })];
    const d = p.schedule({ model: "m", prefixHashes: [] }, fleet, seeded(1));
    expect(d.endpoint?.id).toBe("e1");
    expect(d.scores).toEqual({ "queue-depth": 1 - 3 / 4, "kv-cache": 1 });
    const flipped = new SchedulingProfile({
      ...DEFAULTS,
      scorers: [
        { name: "queue-depth", weight: 3 },
        { name: "kv-cache", weight: 1 },
      ],
    });
    expect(flipped.schedule({ model: "m", prefixHashes: [] }, fleet, seeded(1)).endpoint?.id).toBe("e0");
  });

  test("an endpoint with absent metrics does not win over a known idle one", () => {
    const p = new SchedulingProfile(DEFAULTS);
    const fleet = [endpoint(0, { waiting: undefined, running: undefined, kvUsage: undefined }), endpoint(1)];
    for (let seed = 0; seed < 20; seed++) expect(p.schedule({ model: "m", prefixHashes: [] }, fleet, seeded(seed)).endpoint?.id).toBe("e1");
  });

  test("scores are clamped to [0,1] and NaN counts as 0 before weighting", () => {
    const wild: Scorer = { name: "queue-depth", consumes: [], score: (_r, es) => es.map((e) => [NaN, 7, -3, 0.5][e.index] ?? 0) };
    const p = new SchedulingProfile(
      { ...DEFAULTS, scorers: [{ name: "queue-depth", weight: 1 }] },
      { filters: FILTERS, pickers: PICKERS, scorers: { ...SCORERS, "queue-depth": wild } },
    );
    const fleet = [endpoint(0), endpoint(1), endpoint(2), endpoint(3)];
    const d = p.schedule({ model: "m", prefixHashes: [] }, fleet, seeded(1));
    expect(d.endpoint?.id).toBe("e1");
    expect(d.scores).toEqual({ "queue-depth": 1 });
    // With e1 gone, 0.5 beats NaN (0) and -3 (0).
    expect(p.schedule({ model: "m", prefixHashes: [], exclude: new Set([1]) }, fleet, seeded(1)).endpoint?.id).toBe("e3");
  });

  test("rejects a negative or non-finite weight", () => {
    expect(() => new SchedulingProfile({ ...DEFAULTS, scorers: [{ name: "inflight", weight: -1 }] })).toThrow(RangeError);
    expect(() => new SchedulingProfile({ ...DEFAULTS, scorers: [{ name: "inflight", weight: NaN }] })).toThrow(RangeError);
  });

  test("random picker ignores scores", () => {
    const p = new SchedulingProfile({ ...DEFAULTS, picker: "random" });
    const fleet = [endpoint(0, { waiting: 100, kvUsage: 0.99, inflight: 50 }), endpoint(1)];
    const seen = new Set<string>();
    for (let seed = 0; seed < 40; seed++) seen.add(p.schedule({ model: "m", prefixHashes: [] }, fleet, seeded(seed)).endpoint!.id);
    expect(seen.size).toBe(2);
  });

  test("round-robin picker takes the candidates in turn across decisions, whatever their scores", () => {
    const p = new SchedulingProfile({ ...DEFAULTS, picker: "round-robin" });
    const fleet = [endpoint(0, { waiting: 100, kvUsage: 0.99, inflight: 50 }), endpoint(1), endpoint(2)];
    const ids = Array.from({ length: 6 }, () => p.schedule({ model: "m", prefixHashes: [] }, fleet, seeded(1)).endpoint!.id);
    expect(ids).toEqual(["e0", "e1", "e2", "e0", "e1", "e2"]);
  });
});

/**
 * 4 idle endpoints; 20 distinct prompts, each sent 5 times, interleaved.
 * The router's inflight count rises on each dispatch and falls two
 * requests later, as if requests overlapped a little.
 */
function route(config: SchedulingConfig): { firstOf: string[]; sticky: number } {
  const p = new SchedulingProfile(config);
  const fleet = [0, 1, 2, 3].map((i) => endpoint(i));
  const inflight = [0, 0, 0, 0];
  const open: number[] = [];
  const prompts = Array.from({ length: 20 }, (_, i) => `system prompt number ${i} `.repeat(20));
  const chosen = new Map<number, string[]>();
  const random = seeded(42);
  for (let round = 0; round < 5; round++) {
    for (let i = 0; i < prompts.length; i++) {
      const view = fleet.map((e) => ({ ...e, inflight: inflight[e.index]! }));
      const req: RequestView = { model: "m", prefixHashes: prefixHashes(prompts[i]!, config.prefixAffinity.blockChars, config.prefixAffinity.maxBlocks) };
      const e = p.schedule(req, view, random).endpoint!;
      inflight[e.index]!++;
      open.push(e.index);
      if (open.length > 2) inflight[open.shift()!]!--;
      chosen.set(i, [...(chosen.get(i) ?? []), e.id]);
    }
  }
  const firstOf = [...chosen.values()].map((ids) => ids[0]!);
  const sticky = [...chosen.values()].filter((ids) => ids.every((id) => id === ids[0])).length;
  return { firstOf, sticky };
}

describe("prefix affinity through the profile", () => {
  test("repeated prefixes go to the same endpoint while distinct ones spread", () => {
    const { firstOf, sticky } = route(DEFAULTS);
    expect(sticky).toBe(20);
    const perEndpoint = new Map<string, number>();
    for (const id of firstOf) perEndpoint.set(id, (perEndpoint.get(id) ?? 0) + 1);
    expect(perEndpoint.size).toBe(4);
    for (const n of perEndpoint.values()) expect(n).toBeLessThanOrEqual(8);
  });

  test("without the prefix-affinity scorer the same stream scatters (the scorer is what makes it stick)", () => {
    const { sticky } = route({ ...DEFAULTS, scorers: DEFAULTS.scorers.filter((s) => s.name !== "prefix-affinity") });
    expect(sticky).toBeLessThan(10);
  });

  test("forgetEndpoint releases an endpoint's prefixes", () => {
    const p = new SchedulingProfile(DEFAULTS);
    const fleet = [endpoint(0), endpoint(1)];
    const req: RequestView = { model: "m", prefixHashes: [101, 102] };
    const first = p.schedule(req, fleet, seeded(3)).endpoint!;
    expect(p.prefixIndex.matchedBlocks(req.prefixHashes, first.index)).toBe(2);
    p.forgetEndpoint(first.index);
    expect(p.prefixIndex.matchedBlocks(req.prefixHashes, first.index)).toBe(0);
  });
});

describe("speed", () => {
  test("100 endpoints × 10,000 decisions completes; prints the figure", () => {
    const p = new SchedulingProfile({ ...DEFAULTS, prefixAffinity: { blockChars: 256, maxBlocks: 16, lruEntries: 100_000 } });
    const random = seeded(7);
    const fleet = Array.from({ length: 100 }, (_, i) =>
      endpoint(i, {
        waiting: i % 3 === 0 ? undefined : Math.floor(random() * 20),
        kvUsage: random(),
        inflight: Math.floor(random() * 10),
        models: i % 10 === 0 ? ["other"] : ["m"],
      }),
    );
    const requests: RequestView[] = Array.from({ length: 500 }, (_, i) => ({
      model: "m",
      prefixHashes: Array.from({ length: 16 }, (_, k) => (i % 50) * 1000 + k),
    }));
    const decisions = 10_000;
    let chosen = 0;
    const t0 = performance.now();
    for (let i = 0; i < decisions; i++) if (p.schedule(requests[i % requests.length]!, fleet, random).endpoint !== undefined) chosen++;
    const ms = performance.now() - t0;
    console.log(
      `scheduling: ${decisions} decisions over ${fleet.length} endpoints in ${ms.toFixed(1)} ms (${((ms * 1000) / decisions).toFixed(1)} µs/decision)`,
    );
    expect(chosen).toBe(decisions);
  });
});
