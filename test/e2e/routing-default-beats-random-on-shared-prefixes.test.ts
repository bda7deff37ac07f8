/**
 * Scenario: `llmgw bench routing`, small — llm-d's 37-capacity workload
 * (83 shared system prompts, a working set that fits the four pods' KV
 * caches only if each prefix stays on one pod) at three Poisson rates that
 * end past what random routing can serve, random against llmgw's default
 * policy, each on fresh sim-engines with the same schedule. llmgw's default
 * keeps each prefix on one pod, finds it cached, and answers the first
 * token several times sooner at the 90th percentile; random scatters every
 * prefix over all four pods and queues. Relative figures of one run, with
 * margins a passing stall of the machine does not erase.
 */
import { beforeAll, expect, test } from "bun:test";
import type { RoutingReport } from "../../src/bench/routing/routing-report.ts";
import { runBenchJson } from "../helpers/bench-json.ts";

let r: RoutingReport;

beforeAll(async () => {
  // Engines at half speed (simulated time runs at half the wall clock): a host busy with other work
  // still keeps their schedule, which at full speed stretched and spilled prefixes to more pods.
  r = await runBenchJson<RoutingReport>(["routing", "--policies", "random,default", "--rates", "60,200,400", "--stage-s", "3,2,2", "--time-scale", "0.5"]);
}, 240_000);

const policy = (name: string) => r.policies.find((p) => p.name === name)!;

test("both policies ran the same schedule, and every request was answered", () => {
  expect(r.policies.map((p) => p.name)).toEqual(["random", "default"]);
  for (const p of r.policies) {
    expect(p.figures.requests).toBe(policy("random").figures.requests);
    expect(p.figures.answered).toBe(p.figures.requests);
    expect(p.figures.stages.map((s) => s.rate)).toEqual([60, 200, 400]);
  }
  // Not the 37-capacity schedule, so the target is reported but not held.
  expect(r.target?.applies).toBe(false);
});

test("llmgw's default keeps each prefix on one pod and finds it cached; random scatters it", () => {
  // Random spreads each prefix over nearly all four pods. The default keeps it on one until that
  // pod saturates at the 400/s stage, then spills to a second: 1.55–1.6 pods a prefix in runs on
  // 2-core hosts, random 3.9–4. Held to half of random's spread, not to a figure at that edge.
  console.log(`pods per prefix group: default ${policy("default").figures.pods_per_group}, random ${policy("random").figures.pods_per_group}`);
  expect(policy("random").figures.pods_per_group).toBeGreaterThan(3);
  expect(policy("default").figures.pods_per_group).toBeLessThan(policy("random").figures.pods_per_group / 2);
  expect(policy("default").prefix_cache_hit_rate).toBeGreaterThan(policy("random").prefix_cache_hit_rate + 0.3);
});

test("llmgw's default beats random on TTFT p90 by a margin, and serves more tokens a second", () => {
  const d = policy("default").figures;
  const rnd = policy("random").figures;
  console.log(`TTFT p90: default ${d.ttft_s.p90} s, random ${rnd.ttft_s.p90} s; output tok/s: default ${d.output_tok_s}, random ${rnd.output_tok_s}`);
  expect(d.ttft_s.p90 * 3).toBeLessThan(rnd.ttft_s.p90);
  expect(d.output_tok_s).toBeGreaterThan(rnd.output_tok_s * 1.3);
});
