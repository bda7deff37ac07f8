/**
 * `bench autoscale`: its flags refuse what they cannot run with a usage
 * error naming the flag, and its HTML page carries the controllers' table,
 * a chart per series and every decision that changed the count.
 */
import { describe, expect, test } from "bun:test";
import { autoscaleReport, formatAutoscaleText, renderAutoscaleHtml } from "../../src/bench/autoscale/autoscale-report.ts";
import type { ControllerResult } from "../../src/bench/autoscale/autoscale-twin.ts";
import { llmDRampWorkload } from "../../src/bench/autoscale/llm-d-ramp.ts";
import { oracleBound, oracleSchedule } from "../../src/bench/autoscale/oracle-bound.ts";
import { autoscaleScenario } from "../../src/bench/autoscale-scenario.ts";
import { parseCommandArgs, UsageError } from "../../src/shared/flags.ts";

const spec = { name: "bench autoscale", summary: "", usage: "", options: autoscaleScenario.options, run: async () => 0 };

async function usageError(argv: string[]): Promise<string> {
  try {
    await autoscaleScenario.run(parseCommandArgs(spec, argv));
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return (err as Error).message;
  }
  throw new Error("no usage error");
}

describe("flags", () => {
  test("it runs in the twin only, and says how", async () => {
    expect(await usageError([])).toContain("--twin");
  });
  test("an unknown controller, a start-up out of range or not a number, a utilization out of range", async () => {
    expect(await usageError(["--twin", "--controllers", "capacity,hpa"])).toContain('unknown controller "hpa"');
    expect(await usageError(["--twin", "--startup-s", "100,-1"])).toContain("--startup-s");
    expect(await usageError(["--twin", "--startup-s", "1e9"])).toContain("--startup-s");
    expect(await usageError(["--twin", "--startup-s", "soon"])).toContain("--startup-s");
    expect(await usageError(["--twin", "--target-utilization", "1.5"])).toContain("--target-utilization");
    expect(await usageError(["--twin", "--workload", "sharegpt"])).toContain('unknown workload "sharegpt"');
    expect(await usageError(["--twin", "--workload", "azure-conv", "--copies", "0"])).toContain("--copies");
  });
});

function run(controller: ControllerResult["controller"], counts: number[]): ControllerResult {
  return {
    controller,
    startup_s: 100,
    requests: 100,
    met: 99,
    attainment: 0.99,
    failed: 0,
    replicas_mean: 4.5,
    gpu_hours: 6,
    ttft_p_ms: 400,
    tpot_p_ms: 38,
    scale_ups: 1,
    scale_downs: 1,
    episode_s: 60,
    wall_s: 1,
    timeline: counts.map((n, i) => ({
      at_s: 15 * (i + 1),
      arrival_rps: 4,
      provisioned: n,
      ready: n,
      desired: counts[i + 1] ?? n,
      ttft_p_ms: 400,
      itl_p_ms: 38,
      attainment: 1,
      ...(controller === "static" ? {} : { reason: counts[i + 1] !== undefined && counts[i + 1]! > n ? "forecast" : "hold" }),
    })),
  } as ControllerResult;
}

test("the report: a row per run beside the published ones, charts over time, and the decisions that changed the count", () => {
  const r = autoscaleReport({
    workload: "llm-d-slo-aware-ramp",
    description: "a <ramp> & more",
    w: llmDRampWorkload(),
    targetUtilization: 0.85,
    runs: [run("capacity", [3, 3, 5, 5]), run("static", [8, 8, 8, 8])],
    published: true,
    date: "2026-12-07T00:00:00.000Z",
  });
  const text = formatAutoscaleText(r);
  expect(text).toContain("llmgw (capacity law)");
  expect(text).toContain("95.80 % at 5.93");
  const html = renderAutoscaleHtml(r);
  expect(html).toContain("a &lt;ramp&gt; &amp; more");
  for (const id of ["replicas-100", "arrivals-100", "ttft-100", "itl-100", "attainment-100"]) expect(html).toContain(`id="${id}"`);
  // One decision changed the count (3 → 5, at 30 s); the static fleet has none.
  const decisions = html.slice(html.indexOf('id="decisions"'));
  expect(decisions).toContain("3 → 5");
  expect(decisions).toContain("forecast");
  expect(decisions.match(/<tr>/g)!.length).toBe(2);
  // Opens from disk with nothing fetched.
  expect(html).toContain("default-src 'none'");
});

test("the bound from a trace: per-minute prompt tokens against the static fleet, with perfect foresight and with start-ups ahead", () => {
  // Minutes of 100, 200, 400, 200, 100 prompt tokens (and a cut last minute, left out): the peak needs a static 4.
  const perMinute = [100, 200, 400, 200, 100, 5];
  const requests = perMinute.map((tokens, m) => ({ atMs: m * 60_000 + 1_000, segments: [{ key: `r${m}`, tokens }], maxTokens: 1 }));
  const w = { ...llmDRampWorkload(), requests, scoreFromMs: 0, minReplicas: 1 };
  const b = oracleBound(w, 4, 60)!;
  // Needs 1, 2, 4, 2, 1 → mean 2 of 4; held a minute ahead: 2, 4, 4, 2, 1 → 2.6 of 4.
  expect(b).toEqual({ static_replicas: 4, peak_to_mean: 2, gpu_hours_ratio: 0.5, gpu_hours_ratio_with_startup: 0.65, startup_s: 60 });
  // The oracle controller holds that plan: each minute's count from a start-up before it, the minimum after the last.
  const plan = oracleSchedule(w, 4, 60);
  expect([0, 1, 2, 3, 4, 5].map((m) => plan(m * 60_000 + 30_000))).toEqual([2, 4, 4, 2, 1, 1]);
  const r = autoscaleReport({
    workload: "azure-conv",
    description: "a trace",
    w,
    targetUtilization: 0.85,
    runs: [run("capacity", [2, 2]), { ...run("static", [4, 4]), replicas: 4, startup_s: 60 }],
    published: false,
  });
  expect(r.trace_estimate).toEqual([b]);
  expect(formatAutoscaleText(r)).toContain(
    "(peak minute 2× the mean): resized each minute with perfect foresight, 0.50× a static 4; starting replicas 60 s ahead, 0.65×",
  );
});
