/**
 * `bench routing --twin` on a small schedule: two runs give the same bytes
 * (the fields that time the run aside), and the gateway's own modules make
 * the verdicts the real-time bench makes — the default keeps prefixes
 * together and beats random by far, round-robin spreads evenly.
 */
import { expect, test } from "bun:test";
import { resolve } from "node:path";
import { POLICY_DIR, routingPolicies, selectPolicies } from "../../src/bench/routing/policies.ts";
import * as S from "../../src/bench/routing/scaling.ts";
import { type RoutingOptions, runRouting } from "../../src/bench/routing-scenario.ts";

function options(): RoutingOptions {
  return {
    pods: 4,
    profile: S.DEFAULT_PROFILE,
    kvTokens: S.DEFAULT_KV_TOKENS,
    groups: S.DEFAULT_GROUPS,
    perGroup: S.DEFAULT_PER_GROUP,
    systemLen: S.DEFAULT_SYSTEM_LEN,
    questionLen: S.DEFAULT_QUESTION_LEN,
    outputLen: S.DEFAULT_OUTPUT_LEN,
    warmup: S.DEFAULT_WARMUP,
    stages: [
      { rate: 60, durationS: 2 },
      { rate: 200, durationS: 1.5 },
      { rate: 400, durationS: 1 },
    ],
    timeScale: 1,
    seed: 37,
    drainS: 60,
    engineArgs: [],
    policies: selectPolicies(routingPolicies(resolve(POLICY_DIR)), ["random", "round-robin", "default"]),
    twin: true,
  };
}

/** The report without what times the run itself (wall seconds, date, commit). */
function bytesOf(r: Awaited<ReturnType<typeof runRouting>>): string {
  const run: Record<string, unknown> = { ...r.run };
  delete run.date;
  delete run.commit;
  return JSON.stringify({ ...r, run, policies: r.policies.map(({ wall_s: _, ...p }) => p) });
}

test("two twin runs of the same schedule give the same report, byte for byte", async () => {
  const a = await runRouting(options());
  const b = await runRouting(options());
  expect(bytesOf(a)).toBe(bytesOf(b));
  expect(a.run.clock).toBe("twin");
}, 120_000);

test("in the twin the default routes prefixes where they are cached and beats random as in the real-time bench", async () => {
  const r = await runRouting(options());
  const by = Object.fromEntries(r.policies.map((p) => [p.name, p]));
  const random = by.random!;
  const roundRobin = by["round-robin"]!;
  const def = by.default!;
  for (const p of r.policies) {
    expect(p.figures.errors).toEqual([]);
    expect(p.figures.answered).toBe(p.figures.requests);
  }
  // The precise scorer heard the engines' KV events; the others had none to hear.
  expect(def.kv_events_received).toBeGreaterThan(0);
  expect(random.kv_events_received).toBe(0);
  expect(def.figures.pods_per_group).toBeLessThan(1.5);
  expect(random.figures.pods_per_group).toBeGreaterThan(3);
  expect(def.prefix_cache_hit_rate).toBeGreaterThan(random.prefix_cache_hit_rate + 0.3);
  expect(def.figures.output_tok_s).toBeGreaterThan(1.5 * random.figures.output_tok_s);
  expect(def.figures.ttft_s.p90).toBeLessThan(random.figures.ttft_s.p90 / 5);
  // Round-robin: the engines in turn (the fast path and the queue keep a turn each, as the gateway's two threads do).
  const counts = Object.values(roundRobin.figures.requests_per_pod);
  expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(3);
}, 120_000);
