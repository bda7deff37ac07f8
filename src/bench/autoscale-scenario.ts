/**
 * `llmgw bench autoscale --twin`: the control plane's autoscaler against
 * llm-d's published SLO-aware ramp in the fleet twin — llmgw's capacity
 * law, llm-d's latency formula with its HPA behaviour, and a static fleet
 * at the maximum — each scored on combined SLO attainment and average
 * replicas, at one or more start-up times.
 */
import { writeFileSync } from "node:fs";
import { DEFAULT_TARGET_UTILIZATION } from "../control/autoscale/policy.ts";
import { boolFlag, numberFlag, type ParsedArgs, stringFlag, UsageError } from "../shared/flags.ts";
import { autoscaleReport, formatAutoscaleText, renderAutoscaleHtml } from "./autoscale/autoscale-report.ts";
import {
  type AutoscaleWorkload,
  CONTROLLERS,
  type ControllerName,
  type ControllerResult,
  DEFAULT_PREFILL_BOUND,
  KNOWN_CONTROLLERS,
  PREFILL_BOUNDS,
  type PrefillBound,
  runControllerTwin,
  staticAtEqualAttainment,
} from "./autoscale/autoscale-twin.ts";
import { LLM_D_RAMP, LLM_D_RAMP_STAGES, llmDRampWorkload } from "./autoscale/llm-d-ramp.ts";
import { traceAutoscaleWorkload } from "./autoscale/trace-workload.ts";
import { gitCommit } from "./git-commit.ts";
import { loadTrace, tracePath } from "./replay/trace-files.ts";
import type { BenchScenario } from "./scenario.ts";

const USAGE = `usage: llmgw bench autoscale --twin [--workload NAME] [--copies N] [--warmup-s S] [--controllers LIST]
                              [--startup-s LIST] [--target-utilization F] [--prefill-bound NAME]
                              [--report FILE.html] [--json]

llm-d's SLO-aware autoscaling benchmark at its published size, in the fleet twin:
Qwen3-32B on 2 × H100 (sim profile h100x2-qwen3-32b), constant-rate stages
2 → 4 → 6 → 8 → 10 → 4 → 1 requests/s (${LLM_D_RAMP_STAGES.reduce((a, s) => a + s.durationS, 0)} s), prompts ~4,000 tokens, answers ~1,000,
SLO TTFT ≤ 3 s and TPOT ≤ 100 ms (p90; a request counts when it meets both), 3–8
replicas. Each controller runs the same requests; the episode lasts until the load
has ended and the fleet is back at 3.

  --twin                    run in the fleet twin (required: the real-time proof is an
                            end-to-end test with agents)
  --workload NAME           llm-d-ramp (the default, above), or azure-conv / azure-code: the
                            Azure 2023 trace at its recorded times and lengths, on the same
                            model, hardware and SLO, 1-16 replicas; there \`static\` is the
                            smallest static fleet with the capacity law's attainment (found
                            by search) and the report gives the GPU-hours ratio
  --copies N                a trace's requests are each sent N times, within ±1 s of the
                            original, to raise it to a fleet's size (default: conv 6, code 4)
  --warmup-s S              a trace's first S seconds warm the fleet up and are not scored
                            (default 600)
  --controllers LIST        comma-separated, of capacity (llmgw's law), latency (llm-d's
                            formula and HPA behaviour), static (the maximum, fixed)
                            (default all three), oracle (each minute's load known ahead,
                            sized against the static fleet run before it: a reference)
  --startup-s LIST          replica start-up times to run, s, comma-separated (default 100,
                            llm-d's; e.g. 0,60,120,180,240,300 for a sweep)
  --target-utilization F    the capacity law's share of a replica's learned capacity
                            (default ${DEFAULT_TARGET_UTILIZATION})
  --prefill-bound NAME      where the capacity law's prompt-token throughput per replica
                            comes from: profile (the sim profile's step-time model),
                            learned (the per-replica rate at which TTFT crossed 80 % of
                            its SLO), none (prompt tokens not sampled: no bound)
                            (default ${DEFAULT_PREFILL_BOUND})
  --report FILE.html        also write a self-contained HTML report: replicas, arrival rate,
                            TTFT/TPOT percentiles and attainment over time, every decision
  --json                    one JSON object instead of the table`;

function controllersFlag(value: string | undefined): ControllerName[] {
  if (value === undefined) return [...CONTROLLERS];
  const names = value.split(",").map((s) => s.trim());
  for (const n of names) {
    if (!(KNOWN_CONTROLLERS as readonly string[]).includes(n))
      throw new UsageError(`--controllers: unknown controller "${n}" (known: ${KNOWN_CONTROLLERS.join(", ")})`);
  }
  return names as ControllerName[];
}

function prefillBoundFlag(value: string | undefined): PrefillBound {
  if (value === undefined) return DEFAULT_PREFILL_BOUND;
  if (!(PREFILL_BOUNDS as readonly string[]).includes(value))
    throw new UsageError(`--prefill-bound: unknown source "${value}" (known: ${PREFILL_BOUNDS.join(", ")})`);
  return value as PrefillBound;
}

function startupsFlag(value: string | undefined): number[] {
  if (value === undefined) return [LLM_D_RAMP.startupS];
  return value.split(",").map((s) => {
    const n = Number(s.trim());
    if (s.trim() === "" || !Number.isFinite(n) || n < 0 || n > 3600) throw new UsageError(`--startup-s: "${s}" is not a time in seconds from 0 to 3600`);
    return n;
  });
}

const TRACE_COPIES: Readonly<Record<string, number>> = { "azure-conv": 6, "azure-code": 4 };
const WORKLOADS = ["llm-d-ramp", ...Object.keys(TRACE_COPIES)];

function workloadFor(args: ParsedArgs): { workload: AutoscaleWorkload; name: string; description: string; trace: boolean } {
  const name = stringFlag(args, "workload") ?? "llm-d-ramp";
  if (!WORKLOADS.includes(name)) throw new UsageError(`--workload: unknown workload "${name}" (known: ${WORKLOADS.join(", ")})`);
  if (name === "llm-d-ramp") {
    const w = llmDRampWorkload();
    return {
      workload: w,
      name: "llm-d-slo-aware-ramp",
      trace: false,
      description: `llm-d's SLO-aware ramp: Qwen3-32B, TP 2 on H100, ${LLM_D_RAMP_STAGES.map((s) => s.rps).join(" → ")} req/s, ~4,000 in / ~1,000 out, TTFT ≤ 3 s and TPOT ≤ 100 ms at p90, ${w.minReplicas}–${w.maxReplicas} replicas`,
    };
  }
  const copies = numberFlag(args, "copies", TRACE_COPIES[name]!, { min: 1, max: 100, integer: true });
  const warmupS = numberFlag(args, "warmup-s", 600, { min: 0, max: 3600 });
  const w = traceAutoscaleWorkload(loadTrace(name, tracePath(name)!), copies, warmupS);
  return {
    workload: w,
    name,
    trace: true,
    description: `the Azure 2023 ${name === "azure-conv" ? "conversation" : "code"} trace at its recorded times and lengths, each request ×${copies}, first ${warmupS} s unscored: Qwen3-32B, TP 2 on H100, TTFT ≤ 3 s and TPOT ≤ 100 ms at p90, ${w.minReplicas}–${w.maxReplicas} replicas`,
  };
}

export const autoscaleScenario: BenchScenario = {
  name: "autoscale",
  summary: "SLO-driven autoscaling on llm-d's published ramp in the fleet twin: attainment against average replicas, per controller",
  usage: USAGE,
  options: {
    twin: { type: "boolean" },
    workload: { type: "string" },
    copies: { type: "string" },
    "warmup-s": { type: "string" },
    controllers: { type: "string" },
    "startup-s": { type: "string" },
    "target-utilization": { type: "string" },
    "prefill-bound": { type: "string" },
    report: { type: "string" },
  },
  async run(args) {
    if (!boolFlag(args, "twin")) throw new UsageError("bench autoscale runs in the fleet twin: add --twin");
    const controllers = controllersFlag(stringFlag(args, "controllers"));
    const startups = startupsFlag(stringFlag(args, "startup-s"));
    const targetUtilization = numberFlag(args, "target-utilization", DEFAULT_TARGET_UTILIZATION, { min: 0.05, max: 1 });
    const prefillBound = prefillBoundFlag(stringFlag(args, "prefill-bound"));
    const reportPath = stringFlag(args, "report");
    const json = boolFlag(args, "json");
    const chosen = workloadFor(args);
    const workload = chosen.workload;
    let interrupted = false;
    const onSigint = () => (interrupted = true);
    process.once("SIGINT", onSigint);
    const runs: ControllerResult[] = [];
    const stopped = () => interrupted;
    try {
      for (const startupS of startups) {
        const atStartup: ControllerResult[] = [];
        for (const c of controllers) {
          if (interrupted) break;
          if (!json) process.stderr.write(`  ${c}, start-up ${startupS} s …\n`);
          const o = { startupS, targetUtilization, prefillBound, stopped };
          // On a trace, the static fleet is the smallest that attains what the capacity law did (or 99 % without it).
          const target = atStartup.find((x) => x.controller === "capacity")?.attainment ?? LLM_D_RAMP.target.attainment;
          // The oracle plans against the static fleet run before it (else the maximum).
          const staticReplicas = atStartup.find((x) => x.controller === "static")?.replicas;
          atStartup.push(
            c === "static" && chosen.trace
              ? await staticAtEqualAttainment(workload, target, o)
              : await runControllerTwin(c, workload, { ...o, ...(c === "oracle" && staticReplicas !== undefined ? { staticReplicas } : {}) }),
          );
        }
        runs.push(...atStartup);
      }
    } finally {
      process.off("SIGINT", onSigint);
    }
    const commit = gitCommit();
    const r = autoscaleReport({
      workload: chosen.name,
      description: chosen.description,
      w: workload,
      targetUtilization,
      runs,
      published: !chosen.trace,
      ...(commit === undefined ? {} : { commit }),
    });
    if (reportPath !== undefined) writeFileSync(reportPath, renderAutoscaleHtml(r));
    if (json) console.log(JSON.stringify(r));
    else console.log(formatAutoscaleText(r));
    return interrupted ? 130 : 0;
  },
};
