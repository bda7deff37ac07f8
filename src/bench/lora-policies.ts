/**
 * The LoRA bench's policies and what each run of one reports, shared by the
 * real-time run (lora-scenario.ts) and the fleet twin's (lora-twin.ts).
 */
import type { EngineClockReport } from "./engine-clock-report.ts";
import type { LoraWorkloadOptions } from "./lora-workload.ts";

export const LORA_POLICIES = ["llmgw", "load-only", "random"] as const;
export type LoraPolicy = (typeof LORA_POLICIES)[number];

/** The gateway's `scheduling:` block per policy (undefined: the default profile). */
export const LORA_POLICY_SCHEDULING: Readonly<Record<LoraPolicy, Record<string, unknown> | undefined>> = {
  llmgw: undefined,
  "load-only": {
    scorers: [
      { name: "queue-depth", weight: 2 },
      { name: "kv-cache", weight: 1 },
      { name: "inflight", weight: 2 },
    ],
  },
  random: { picker: "random", scorers: [] },
};

export interface LoraBenchOptions {
  workload: LoraWorkloadOptions;
  replicas: number;
  policies: readonly LoraPolicy[];
  /** The sims' --time-scale: arrivals are sent that much faster and TTFT and rates are reported in simulated units. */
  timeScale: number;
  /** sim-engine --profile (default: the sim's own, H100 × Llama-3.1-8B). */
  profile?: string;
  /** Run each policy in the fleet twin (virtual clock, one process) instead of real processes. */
  twin?: boolean;
  log?: (line: string) => void;
}

export interface LoraPolicyResult {
  policy: LoraPolicy;
  requests: number;
  errors: number;
  adapter_loads: number;
  loads_per_1000: number;
  ttft_p50_ms: number;
  ttft_p90_ms: number;
  output_tokens: number;
  output_tok_per_s: number;
  /** Simulated seconds from the first measured request sent to the last answer. */
  duration_s: number;
  /** Whether the sim-engines kept their own clock through the measured requests (absent in the twin, whose clock is virtual). */
  engine_clock?: EngineClockReport;
}

export interface LoraBenchReport {
  scenario: "lora";
  replicas: number;
  time_scale: number;
  workload: LoraWorkloadOptions;
  /** Share of requests the 1, 4 and 16 most popular adapters get. */
  top_shares: { top1: number; top4: number; top16: number };
  results: LoraPolicyResult[];
  /** random's loads per 1,000 / llmgw's, and llmgw's TTFT p90 / random's (when both ran). */
  loads_ratio_vs_random?: number;
  ttft_p90_ratio_vs_random?: number;
  /** "twin" with --twin, else "real-time". */
  clock: "real-time" | "twin";
}
