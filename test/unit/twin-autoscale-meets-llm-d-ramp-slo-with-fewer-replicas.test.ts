/**
 * llm-d's SLO-aware ramp at its published size in the fleet twin, with
 * llmgw's capacity law deciding: the target (≥ 99 % combined
 * attainment at ≤ 5.5 average replicas with ~100 s start-ups) holds, the
 * fleet grows before the peak and is back at its floor at the end, and each
 * change names its reason. The twin runs on a virtual clock, so the figures
 * do not move with the host.
 */
import { expect, test } from "bun:test";
import { runControllerTwin } from "../../src/bench/autoscale/autoscale-twin.ts";
import { LLM_D_RAMP, llmDRampWorkload } from "../../src/bench/autoscale/llm-d-ramp.ts";
import { DEFAULT_TARGET_UTILIZATION } from "../../src/control/autoscale/policy.ts";

test("the capacity law meets llm-d's ramp at ≥ 99 % attainment on ≤ 5.5 replicas on average, and scales back to the floor", async () => {
  const r = await runControllerTwin("capacity", llmDRampWorkload(), { startupS: LLM_D_RAMP.startupS, targetUtilization: DEFAULT_TARGET_UTILIZATION });
  console.log(JSON.stringify({ attainment: r.attainment, replicas_mean: r.replicas_mean, gpu_hours: r.gpu_hours, ups: r.scale_ups, downs: r.scale_downs }));
  expect(r.requests).toBe(12_480);
  expect(r.failed).toBe(0);
  expect(r.attainment).toBeGreaterThanOrEqual(LLM_D_RAMP.target.attainment);
  expect(r.replicas_mean).toBeLessThanOrEqual(LLM_D_RAMP.target.replicas);
  // It used what the peak needs: more than the floor during the 10 req/s stage, the floor again at the end.
  const peak = r.timeline.filter((p) => p.at_s > 1500 && p.at_s < 1770);
  expect(Math.min(...peak.map((p) => p.provisioned))).toBeGreaterThan(LLM_D_RAMP.minReplicas + 2);
  expect(r.timeline.at(-1)!.provisioned).toBe(LLM_D_RAMP.minReplicas);
  // Every change of the count has a reason from the closed set, and the fleet grew before its first breach.
  const changes = r.timeline.filter((p) => p.desired !== p.provisioned);
  expect(changes.length).toBeGreaterThan(0);
  expect(changes.every((p) => p.reason === "forecast" || p.reason === "slo-breach" || p.reason === "surge")).toBe(true);
  expect(changes.filter((p) => p.desired > p.provisioned)[0]!.reason).toBe("forecast");
}, 300_000);
