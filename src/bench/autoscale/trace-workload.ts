/**
 * A production trace as an autoscaling workload: every request at its
 * recorded time with its recorded lengths (answers decoded in full, as
 * `bench replay` sends them), each sent `copies` times, the copies spread
 * over ± COPY_SPREAD_MS around the original. The trace's shape over
 * seconds and minutes — its bursts and lulls, which decide what a fleet
 * must hold — is kept; only its size is raised to a fleet's. The model,
 * hardware and SLO are llm-d's ramp's, so the two workloads read alike.
 */
import { sfc32 } from "../../shared/sfc32.ts";
import type { ScheduledRequest } from "../replay/open-loop-driver.ts";
import type { Trace } from "../replay/trace.ts";
import type { AutoscaleWorkload } from "./autoscale-twin.ts";
import { LLM_D_RAMP } from "./llm-d-ramp.ts";

/** Copies of a request arrive within this much of it, ms. */
const COPY_SPREAD_MS = 1_000;

/** The bounds a trace's fleet is scaled within. */
const TRACE_REPLICAS = { min: 1, max: 16 };

function traceRequests(trace: Trace, copies: number): ScheduledRequest[] {
  const next = sfc32(0x74726163, copies, 0x636f7079, 0x9e3779b9);
  const out: ScheduledRequest[] = [];
  trace.requests.forEach((r, i) => {
    for (let c = 0; c < copies; c++) {
      const offset = c === 0 ? 0 : (next() / 4_294_967_296) * 2 * COPY_SPREAD_MS - COPY_SPREAD_MS;
      out.push({
        atMs: Math.max(0, r.atMs + offset),
        segments: [{ key: `trace-${i}-${c}`, tokens: Math.max(1, r.inputTokens) }],
        maxTokens: Math.max(1, r.outputTokens),
      });
    }
  });
  return out.sort((a, b) => a.atMs - b.atMs);
}

export function traceAutoscaleWorkload(trace: Trace, copies: number, warmupS: number): AutoscaleWorkload {
  return {
    name: "Qwen/Qwen3-32B",
    requests: traceRequests(trace, copies),
    profile: LLM_D_RAMP.profile,
    tensorParallel: LLM_D_RAMP.tensorParallel,
    gpuClass: LLM_D_RAMP.gpuClass,
    slo: LLM_D_RAMP.slo,
    minReplicas: TRACE_REPLICAS.min,
    maxReplicas: TRACE_REPLICAS.max,
    scoreFromMs: warmupS * 1000,
  };
}
