/**
 * The full-size verdicts of `bench routing`: each policy's output tok/s
 * against its published row (baselines held within ±30 %), and llmgw's
 * default's gain over random against the published best scheduler's.
 */
import { expect, test } from "bun:test";
import type { PublishedScheduler } from "../../src/bench/routing/published-37-capacity.ts";
import { fullSizeVerdict, type PolicyReport, ratios } from "../../src/bench/routing/routing-report.ts";

function policy(name: string, published: PublishedScheduler | undefined, outputTokS: number, ttftP90S: number): PolicyReport {
  return {
    name,
    description: name,
    source: `derived: ${name}`,
    ...(published ? { published } : {}),
    figures: {
      requests: 10,
      answered: 10,
      success: 1,
      output_tok_s: outputTokS,
      req_s: 1,
      ttft_s: { p50: ttftP90S / 2, p90: ttftP90S, mean: ttftP90S / 2 },
      itl_mean_ms: 20,
      pods_per_group: 1,
      requests_per_pod: {},
      stages: [],
      errors: [],
    },
    prefix_cache_hit_rate: 0.5,
    preemptions: 0,
    kv_events_received: 0,
    send_lateness_ms: { p50: 0, p99: 0 },
    wall_s: 1,
  };
}

test("baselines within 30 % of their published output tok/s pass; one outside fails the fidelity verdict", () => {
  // Published: random 2,991.5, load 2,669.0, precise 5,380.9 output tok/s.
  const ps = [
    policy("random", "random", 2700, 80),
    policy("load", "load", 2000, 90),
    policy("round-robin", undefined, 2800, 85),
    policy("default", "precise", 6000, 0.3),
  ];
  const v = fullSizeVerdict(ps, ratios(ps), true);
  expect(v.fidelity.map((f) => [f.name, f.error, f.baseline, f.within])).toEqual([
    ["random", -0.0974, true, true],
    ["load", -0.2507, true, true],
    ["default", 0.1151, false, true],
  ]);
  expect(v.baselines_within).toBe(true);
  const worse = [policy("random", "random", 2700, 80), policy("load", "load", 1800, 90)];
  expect(fullSizeVerdict(worse, ratios(worse), true).baselines_within).toBe(false);
});

test("the default is held to the published best's gain over random, on output tok/s and on TTFT p90", () => {
  // Published precise ÷ random: 1.80× output tok/s, TTFT p90 0.409 / 84.9 s = 1/208.
  const good = [policy("random", "random", 3000, 90), policy("default", "precise", 5500, 0.4)];
  expect(fullSizeVerdict(good, ratios(good), true).router).toMatchObject({ output_met: true, ttft_met: true });
  const slowFirstToken = [policy("random", "random", 3000, 90), policy("default", "precise", 5500, 2)];
  expect(fullSizeVerdict(slowFirstToken, ratios(slowFirstToken), true).router).toMatchObject({ output_met: true, ttft_met: false });
  const fewTokens = [policy("random", "random", 3000, 90), policy("default", "precise", 4000, 0.4)];
  expect(fullSizeVerdict(fewTokens, ratios(fewTokens), true).router).toMatchObject({ output_met: false, ttft_met: true });
  // Without random or without the default there is no gain to hold.
  const alone = [policy("default", "precise", 5500, 0.4)];
  expect(fullSizeVerdict(alone, ratios(alone), true).router).toBeNull();
  expect(fullSizeVerdict(alone, ratios(alone), true).baselines_within).toBe(false);
});
