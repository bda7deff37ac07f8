/**
 * Every filter and scorer says what it reads, and startup wires the costly
 * inputs (prompt-prefix hashing, the KV-events worker and /tokenize) from
 * those declarations alone. A plugin added without a declaration, or one
 * reading an on-demand input it does not declare (it would get nothing in a
 * gateway whose profile names no other reader), fails here.
 */
import { describe, expect, test } from "bun:test";
import { schedulingSchema } from "../../src/config/schema.ts";
import { excludeTried } from "../../src/scheduling/filters/exclude.ts";
import { FILTERS, SCORERS } from "../../src/scheduling/plugin-registry.ts";
import { profileInputs } from "../../src/scheduling/profile-inputs.ts";
import { type RequestView, SCHEDULING_INPUTS, type SchedulingContext, type SchedulingInput } from "../../src/scheduling/types.ts";
import { CACHE_AFFINITY, endpoint } from "../helpers/scheduling.ts";

const fleet = [endpoint(0, { waiting: 3, inflight: 2 }), endpoint(1, { waiting: 0, kvUsage: 0.5 }), endpoint(2, { inflight: 5, capacity: 4 })];

/** What the prefix index says: endpoint 0 was sent the whole prefix. */
const prefixIndex = { matchedBlocks: (hashes: readonly number[], index: number) => (index === 0 ? hashes.length : 0) };
/** What the engines' KV-cache events say: endpoint 1 holds the whole prompt. */
const liveKv = { live: () => true, matchedBlocks: (keys: readonly number[], index: number) => (index === 1 ? keys.length : 0) };
const deadKv = { live: () => false, matchedBlocks: () => 0 };

const ctx = (kvIndex: SchedulingContext["kvIndex"]): SchedulingContext => ({
  prefixIndex,
  kvIndex,
  preciseStandIn: "prefix-affinity",
  cacheAffinity: CACHE_AFFINITY,
});

/** The request and context with and without each on-demand input, everything else the same. */
const arms: Record<"prefix-hashes" | "kv-blocks", { without: [RequestView, SchedulingContext]; with: [RequestView, SchedulingContext] }> = {
  "prefix-hashes": {
    without: [{ model: "m", prefixHashes: [], promptTokens: 1000 }, ctx(deadKv)],
    with: [{ model: "m", prefixHashes: [11, 12, 13], promptTokens: 1000 }, ctx(deadKv)],
  },
  "kv-blocks": {
    without: [{ model: "m", prefixHashes: [11, 12, 13], promptTokens: 1000 }, ctx(deadKv)],
    with: [{ model: "m", prefixHashes: [11, 12, 13], tokenBlockKeys: [21, 22], promptTokens: 1000 }, ctx(liveKv)],
  },
};

describe("every registered plugin declares its inputs", () => {
  const plugins = [...Object.values(FILTERS), excludeTried, ...Object.values(SCORERS)];

  test.each(plugins.map((p) => [p.name, p] as const))("%s declares at least one known input", (_name, plugin) => {
    expect(Array.isArray(plugin.consumes)).toBe(true);
    expect(plugin.consumes.length).toBeGreaterThan(0);
    for (const input of plugin.consumes) expect(SCHEDULING_INPUTS).toContain(input);
  });

  for (const input of ["prefix-hashes", "kv-blocks"] as const) {
    const scorers = Object.values(SCORERS).map((s) => [s.name, s] as const);
    test.each(scorers)(`%s's scores move with ${input} exactly when it declares it`, (_name, scorer) => {
      const { without, with: present } = arms[input];
      const a = scorer.score(without[0], fleet, without[1]);
      const b = scorer.score(present[0], fleet, present[1]);
      if (scorer.consumes.includes(input)) expect(b).not.toEqual(a);
      else expect(b).toEqual(a);
    });

    const filters = Object.values(FILTERS).map((f) => [f.name, f] as const);
    test.each(filters)(`filter %s keeps the same endpoints with or without ${input} unless it declares it`, (_name, filter) => {
      if (filter.consumes.includes(input)) return;
      const { without, with: present } = arms[input];
      expect(filter.filter(present[0], fleet, present[1]).map((e) => e.index)).toEqual(filter.filter(without[0], fleet, without[1]).map((e) => e.index));
    });
  }
});

describe("profileInputs: what a configured profile needs wired", () => {
  const defaults = schedulingSchema.parse({});
  type Scorers = { name: (typeof defaults.scorers)[number]["name"]; weight: number }[];
  const has = (scorers: Scorers, input: SchedulingInput) => profileInputs({ filters: defaults.filters, scorers }).has(input);

  test("the default profile (precise-prefix at 3) needs prompt-prefix hashes and the engines' KV blocks", () => {
    const inputs = profileInputs(defaults);
    expect(inputs.has("prefix-hashes")).toBe(true);
    expect(inputs.has("kv-blocks")).toBe(true);
  });

  test("a load-only profile needs neither prefix hashes nor KV blocks", () => {
    const load = [
      { name: "queue-depth", weight: 2 },
      { name: "kv-cache", weight: 1 },
      { name: "inflight", weight: 2 },
      { name: "lora-affinity", weight: 6 },
    ] as const;
    expect(has([...load], "prefix-hashes")).toBe(false);
    expect(has([...load], "kv-blocks")).toBe(false);
    expect(has([...load], "engine-load")).toBe(true);
  });

  test("prefix-affinity or prefix-rendezvous needs prefix hashes but no KV blocks", () => {
    for (const name of ["prefix-affinity", "prefix-rendezvous"] as const) {
      expect(has([{ name, weight: 3 }], "prefix-hashes")).toBe(true);
      expect(has([{ name, weight: 3 }], "kv-blocks")).toBe(false);
    }
  });

  test("a scorer weighted 0 moves no decision, so nothing is wired for it", () => {
    expect(
      has(
        [
          { name: "precise-prefix", weight: 0 },
          { name: "inflight", weight: 1 },
        ],
        "kv-blocks",
      ),
    ).toBe(false);
    expect(
      has(
        [
          { name: "precise-prefix", weight: 0 },
          { name: "inflight", weight: 1 },
        ],
        "prefix-hashes",
      ),
    ).toBe(false);
  });

  test("filters count whatever the scorers are", () => {
    const inputs = profileInputs({ filters: ["gpu-healthy", "serves-adapter"], scorers: [] });
    expect([...inputs].sort()).toEqual(["gpu-faults", "lora"]);
  });
});
