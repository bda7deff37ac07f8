/**
 * `llmgw bench routing --full-size --twin`: the 37-capacity experiment at its
 * published token counts and KV capacity, with the flags given beside it
 * still applied. At full size a request may wait in the gateway's queue as
 * many times longer as it lives: a backlog of minutes is served, not shed at
 * the default band's 60 s.
 */
import { expect, test } from "bun:test";
import type { RoutingReport } from "../../src/bench/routing/routing-report.ts";
import { runBench, runBenchJson } from "../helpers/bench-json.ts";

test("a full-size twin run has the published shape, takes the flags beside it, and serves a backlog longer than the default queue time-to-live", async () => {
  // One 30 s stage at the published top rate: random falls minutes behind.
  const report = await runBenchJson<RoutingReport>([
    "routing",
    "--full-size",
    "--twin",
    "--rates",
    "20",
    "--stage-s",
    "30",
    "--warmup-s",
    "0",
    "--policies",
    "random,default",
  ]);
  expect(report.run).toMatchObject({
    full_size: true,
    clock: "twin",
    system_len: 8000,
    question_len: 1000,
    output_len: 1000,
    kv_tokens: 461_376,
    warmup: null,
    stages: [{ rate: 20, durationS: 30 }],
  });
  const by = Object.fromEntries(report.policies.map((p) => [p.name, p]));
  for (const p of report.policies) {
    expect(p.figures.errors).toEqual([]);
    expect(p.figures.answered).toBe(p.figures.requests);
  }
  // Random's requests waited past the default band's 60 s and were still served.
  expect(by.random!.figures.ttft_s.p90).toBeGreaterThan(60);
  expect(by.default!.figures.output_tok_s).toBeGreaterThan(1.5 * by.random!.figures.output_tok_s);
  // The published rows are held directly; the flags changed the published shape, so not as a verdict.
  expect(report.target).toBeNull();
  expect(report.full_size?.applies).toBe(false);
  expect(report.full_size?.fidelity.map((f) => [f.name, f.scheduler, f.published_output_tok_s])).toEqual([
    ["random", "random", 2991.5],
    ["default", "precise", 5380.9],
  ]);
  expect(report.full_size?.router?.published.output_tok_s_ratio).toBeCloseTo(5380.9 / 2991.5, 2);
}, 120_000);

test("the text report puts each policy beside its published row at full size", async () => {
  const r = await runBench(["routing", "--full-size", "--twin", "--rates", "3", "--stage-s", "20", "--warmup-s", "0", "--policies", "random"]);
  expect({ code: r.code, err: r.code === 0 ? "" : r.stderr.slice(-1500) }).toEqual({ code: 0, err: "" });
  expect(r.stdout).toContain("37-capacity shape at its published size");
  expect(r.stdout).toContain("at full size, each policy against its published row");
  expect(r.stdout).toContain("(the run's flags changed the published shape: not held to these)");
}, 120_000);

test("the optimized-baseline experiment runs llm-d's shape with round-robin and the default beside the published arms", async () => {
  // One short stage at a published rate: the published shape and pods, flags still applying.
  const report = await runBenchJson<RoutingReport>([
    "routing",
    "--experiment",
    "optimized-baseline",
    "--twin",
    "--rates",
    "10",
    "--stage-s",
    "20",
    "--warmup-s",
    "0",
  ]);
  expect(report.run).toMatchObject({
    experiment: "optimized-baseline",
    full_size: true,
    pods: 8,
    profile: "h100x2-qwen3-32b",
    groups: 150,
    per_group: 5,
    system_len: 6000,
    question_len: 1200,
    output_len: 1000,
    stages: [{ rate: 10, durationS: 20 }],
  });
  expect(report.policies.map((p) => p.name)).toEqual(["round-robin", "default"]);
  for (const p of report.policies) expect(p.figures.answered).toBe(p.figures.requests);
  // The 37-capacity verdicts do not apply to this shape; the optimized baseline's do, but not to a run whose flags changed it.
  expect(report.target).toBeNull();
  expect(report.full_size).toBeNull();
  const ob = report.optimized_baseline!;
  expect(ob.applies).toBe(false);
  expect(ob.arms.map((a) => [a.arm, a.policy, a.published_peak_output_tok_s])).toEqual([
    ["round-robin", "round-robin", 7049],
    ["llm-d", "default", 14941],
  ]);
  expect(ob.router?.published_gain).toBeCloseTo(14941 / 7049, 2);
  // Not the published ladder: no per-rate rows to set beside it.
  expect(ob.rates).toEqual([]);
}, 180_000);
