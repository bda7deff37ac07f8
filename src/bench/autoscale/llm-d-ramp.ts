/**
 * llm-d's SLO-aware autoscaling benchmark as published (llm-d/llm-d,
 * guides/workload-autoscaling/README.slo-aware.md and slo-aware/
 * benchmark-templates/: BENCHMARK.md, scored-config.yml): Qwen3-32B on
 * H100 with TP 2, inference-perf's constant-rate stages, random prompts of
 * ~4,000 tokens and answers of ~1,000 (ignore_eos), SLO TTFT ≤ 3 s and TPOT
 * ≤ 100 ms at p90, 3–8 replicas, pods ready in ~100 s. Their KEDA loop
 * averaged 95.8 % combined attainment at 5.93 replicas; a static 8, 100 %.
 */

import { sfc32 } from "../../shared/sfc32.ts";
import type { ScheduledRequest } from "../replay/open-loop-driver.ts";
import type { AutoscaleWorkload } from "./autoscale-twin.ts";

/** inference-perf's `constant` load: requests evenly spaced at the stage's rate. */
export const LLM_D_RAMP_STAGES: readonly { rps: number; durationS: number }[] = [
  { rps: 2, durationS: 330 },
  { rps: 4, durationS: 360 },
  { rps: 6, durationS: 360 },
  { rps: 8, durationS: 360 },
  { rps: 10, durationS: 360 },
  { rps: 4, durationS: 360 },
  { rps: 1, durationS: 300 },
];

/** scored-config.yml's data: normal lengths, clipped to [min, max]. */
const INPUT = { mean: 4000, sd: 300, min: 3500, max: 4500 };
const OUTPUT = { mean: 1000, sd: 80, min: 900, max: 1100 };

export const LLM_D_RAMP = {
  profile: "h100x2-qwen3-32b",
  tensorParallel: 2,
  gpuClass: "H100-80GB",
  slo: { ttftMs: 3000, itlMs: 100, percentile: 90 },
  minReplicas: 3,
  maxReplicas: 8,
  startupS: 100,
  published: {
    source: "llm-d/llm-d guides/workload-autoscaling/slo-aware/benchmark-templates/BENCHMARK.md",
    keda: { attainment: 0.958, replicas: 5.93 },
    static: { attainment: 1, replicas: 8 },
  },
  /** What llmgw's controller is held to on this ramp: a higher attainment than llm-d's loop reached, on fewer replicas. */
  target: { attainment: 0.99, replicas: 5.5 },
} as const;

/** A value from a normal distribution clipped to [min, max] by drawing again (Box–Muller on a seeded generator). */
function clippedNormal(next: () => number, d: { mean: number; sd: number; min: number; max: number }): number {
  for (;;) {
    const u = (next() + 1) / 4_294_967_297;
    const v = next() / 4_294_967_296;
    const x = Math.round(d.mean + d.sd * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v));
    if (x >= d.min && x <= d.max) return x;
  }
}

/** The ramp's requests, the same for every controller and run (`seed` fixes the lengths). */
function llmDRampRequests(seed = 1): ScheduledRequest[] {
  const next = sfc32(0x6c6c6d64, seed, 0x72616d70, 0x9e3779b9);
  const out: ScheduledRequest[] = [];
  let startMs = 0;
  for (const stage of LLM_D_RAMP_STAGES) {
    const n = Math.round(stage.rps * stage.durationS);
    for (let k = 0; k < n; k++) {
      const i = out.length;
      out.push({
        atMs: startMs + (k * 1000) / stage.rps,
        segments: [{ key: `ramp-${i}`, tokens: clippedNormal(next, INPUT) }],
        maxTokens: clippedNormal(next, OUTPUT),
      });
    }
    startMs += stage.durationS * 1000;
  }
  return out;
}

/** The ramp as the bench runs it: its requests, model, hardware, SLO and replica bounds. */
export function llmDRampWorkload(): AutoscaleWorkload {
  return {
    name: "Qwen/Qwen3-32B",
    requests: llmDRampRequests(),
    profile: LLM_D_RAMP.profile,
    tensorParallel: LLM_D_RAMP.tensorParallel,
    gpuClass: LLM_D_RAMP.gpuClass,
    slo: LLM_D_RAMP.slo,
    minReplicas: LLM_D_RAMP.minReplicas,
    maxReplicas: LLM_D_RAMP.maxReplicas,
    scoreFromMs: 0,
  };
}
