/**
 * Real vLLM runs with their exact workloads: the ground truth BLIS (llm-d's
 * simulator) is trained and measured on, repository inference-sim/training
 * (commit ed5c1d2, `default_args/<dir>/`: `exp-config.yaml` for the engine,
 * `results/config.yaml` for the workload as inference-perf parsed it,
 * `results/stage_N_lifecycle_metrics.json` for the figures). The repository
 * carries no licence: what is here are figures quoted as facts, with the
 * directory each comes from, as for the other published measurements.
 *
 * The runs: H100 SXM, an instrumented vLLM build, inference-perf (between its
 * v0.2.0 and v0.3.0) sending streamed completions with `ignore_eos`, open
 * loop. What the load generator did (its source, read for this):
 * - `shared_prefix` data: 10 groups × 10 prompts; each group's system prompt
 *   and each question are random token ids decoded to text, the prompt
 *   `system + " " + question`; the 100 prompts are shuffled once and request
 *   n of a stage sends prompt n mod 100; every request asks `max_tokens` =
 *   the output length, decoded in full (`ignore_eos`).
 * - `constant` load: per stage, rate × duration exponential gaps rescaled to
 *   sum to the duration; a stage's requests all finish, then 2 s pass before
 *   the next stage's first arrival. No client concurrency limit (22,400
 *   slots); a request is dropped after 300 s (aiohttp's default timeout).
 * - Measured per request by the client: TTFT (to the first streamed line),
 *   end-to-end latency, and inter-token latency over every line it reads —
 *   the blank line after each `data:` event included, so the reported ITL
 *   mean is (last − first line) ÷ (2 × tokens + 1), about half the engine's
 *   time per token. `promptTokensMean` is the client's count (the tokenizer
 *   run again on the decoded text, BOS included).
 *
 * `overload`: the runs BLIS leaves out of its active set (over 10 % of
 * requests timed out); shown, not counted in the medians.
 */

/** Every run's engine (`exp-config.yaml`): the same flags throughout. */
export const GROUND_TRUTH_ENGINE = Object.freeze({
  maxNumSeqs: 128,
  maxNumBatchedTokens: 2048,
  maxModelLen: 4096,
  gpu: "h100",
  blockSize: 16,
  /** vLLM 0.15 (BLIS's blog) schedules asynchronously by default. */
  asyncScheduling: true,
});

/** The load generator's request timeout (s): aiohttp's default total timeout. */
export const CLIENT_TIMEOUT_S = 300;

/** Seconds from a stage's last completion to the next stage's first arrival (the generator's 1 s interval and its 1 s start offset). */
export const STAGE_GAP_S = 2;

export interface GroundTruthStage {
  /** Requests per second; the stage sends rate × durationS requests. */
  rate: number;
  durationS: number;
  ok: number;
  failed: number;
  promptTokensMean: number;
  ttftMeanMs: number;
  ttftP99Ms: number;
  e2eMeanMs: number;
  /** As the client measures it (see above): about half the engine's time per token. */
  itlMeanMs: number;
  /**
   * The gaps between tokens at their 50th, 80th, 90th and 98th percentiles
   * (ms): the published ITL list's p75, p90, p95 and p99, half of whose gaps
   * are the blank lines' microseconds. On the lightest stage of the general
   * and codegen runs, where they measure how much a step's time varies.
   */
  tokenGapsMs?: readonly [number, number, number, number];
}

export interface GroundTruthRun {
  id: string;
  /** The run's directory under default_args/. */
  dir: string;
  /** A model of `src/sim/profiles/model-facts.ts`. */
  arch: string;
  tp: number;
  workload: "general" | "codegen" | "roleplay" | "reasoning";
  /** inference-perf's shared_prefix lengths as configured (random ids: the prompt re-tokenizes a little longer, see promptTokensMean). */
  shape: { systemTokens: number; questionTokens: number; outputTokens: number };
  /** KV-cache blocks per GPU the engine reported (its step traces, kv_blocks_total_gpu; the repository's replay_data at commit c7a8c35). */
  kvBlocks: number;
  overload?: true;
  stages: GroundTruthStage[];
}

/**
 * The runs the efficiency constants are fitted to (`bench calibrate --fit`):
 * the general and code workloads, two rates each; roleplay (longer system
 * prompts and questions) and reasoning (long answers, an engine past its
 * capacity) are held out.
 */
export const GROUND_TRUTH_FIT_WORKLOADS: readonly GroundTruthRun["workload"][] = ["general", "codegen"];

export const GROUND_TRUTH_SOURCE = "github.com/inference-sim/training (commit ed5c1d2), default_args/<dir>/results";

export const GROUND_TRUTH_RUNS: readonly GroundTruthRun[] = [
  {
    id: "llama-2-7b-tp1-general",
    dir: "20260217-231439-llama-2-7b-tp1-general",
    arch: "llama-2-7b",
    tp: 1,
    workload: "general",
    shape: { systemTokens: 100, questionTokens: 447, outputTokens: 248 },
    kvBlocks: 7462,
    stages: [
      {
        rate: 8,
        durationS: 600,
        ok: 4800,
        failed: 0,
        promptTokensMean: 575.45,
        ttftMeanMs: 27.109,
        ttftP99Ms: 36.584,
        e2eMeanMs: 2057.6,
        itlMeanMs: 4.0817,
        tokenGapsMs: [8.167, 8.714, 9.04, 9.816],
      },
      {
        rate: 20,
        durationS: 600,
        ok: 12000,
        failed: 0,
        promptTokensMean: 575.45,
        ttftMeanMs: 51.854,
        ttftP99Ms: 72.478,
        e2eMeanMs: 4158.15,
        itlMeanMs: 8.2587,
      },
    ],
  },
  {
    id: "llama-2-7b-tp1-codegen",
    dir: "20260217-155451-llama-2-7b-tp1-codegen",
    arch: "llama-2-7b",
    tp: 1,
    workload: "codegen",
    shape: { systemTokens: 100, questionTokens: 466, outputTokens: 247 },
    kvBlocks: 7462,
    stages: [
      {
        rate: 5,
        durationS: 600,
        ok: 3000,
        failed: 0,
        promptTokensMean: 591.63,
        ttftMeanMs: 25.037,
        ttftP99Ms: 45.97,
        e2eMeanMs: 1810.322,
        itlMeanMs: 3.6027,
        tokenGapsMs: [7.187, 7.629, 7.892, 8.584],
      },
      {
        rate: 10,
        durationS: 600,
        ok: 6000,
        failed: 0,
        promptTokensMean: 591.63,
        ttftMeanMs: 29.454,
        ttftP99Ms: 50.752,
        e2eMeanMs: 2215.948,
        itlMeanMs: 4.4136,
      },
    ],
  },
  {
    id: "llama-2-7b-tp1-roleplay",
    dir: "20260217-162547-llama-2-7b-tp1-roleplay",
    arch: "llama-2-7b",
    tp: 1,
    workload: "roleplay",
    shape: { systemTokens: 150, questionTokens: 600, outputTokens: 251 },
    kvBlocks: 7462,
    stages: [
      { rate: 6, durationS: 1200, ok: 7200, failed: 0, promptTokensMean: 785.84, ttftMeanMs: 27.129, ttftP99Ms: 38.264, e2eMeanMs: 2071.12, itlMeanMs: 4.0594 },
    ],
  },
  {
    id: "llama-2-7b-tp1-reasoning",
    dir: "20260217-170634-llama-2-7b-tp1-reasoning",
    arch: "llama-2-7b",
    tp: 1,
    workload: "reasoning",
    shape: { systemTokens: 100, questionTokens: 934, outputTokens: 1448 },
    kvBlocks: 7462,
    overload: true,
    stages: [
      {
        rate: 4,
        durationS: 1200,
        ok: 732,
        failed: 4068,
        promptTokensMean: 1082.22,
        ttftMeanMs: 106644.683,
        ttftP99Ms: 246506.774,
        e2eMeanMs: 160063.278,
        itlMeanMs: 18.4389,
      },
    ],
  },
  {
    id: "llama-2-70b-tp4-general",
    dir: "20260217-202857-llama-2-70b-tp4-general",
    arch: "llama-2-70b",
    tp: 4,
    workload: "general",
    shape: { systemTokens: 100, questionTokens: 447, outputTokens: 248 },
    kvBlocks: 31356,
    stages: [
      {
        rate: 8,
        durationS: 600,
        ok: 4800,
        failed: 0,
        promptTokensMean: 574.91,
        ttftMeanMs: 57.389,
        ttftP99Ms: 120.615,
        e2eMeanMs: 4678.399,
        itlMeanMs: 9.2944,
        tokenGapsMs: [18.536, 19.08, 19.457, 20.902],
      },
      {
        rate: 20,
        durationS: 600,
        ok: 12000,
        failed: 0,
        promptTokensMean: 574.91,
        ttftMeanMs: 121.275,
        ttftP99Ms: 986.816,
        e2eMeanMs: 5577.488,
        itlMeanMs: 10.9746,
      },
    ],
  },
  {
    id: "llama-2-70b-tp4-codegen",
    dir: "20260217-203421-llama-2-70b-hf-tp4-codegen",
    arch: "llama-2-70b",
    tp: 4,
    workload: "codegen",
    shape: { systemTokens: 100, questionTokens: 466, outputTokens: 247 },
    kvBlocks: 31356,
    stages: [
      {
        rate: 5,
        durationS: 600,
        ok: 3000,
        failed: 0,
        promptTokensMean: 593.49,
        ttftMeanMs: 53.403,
        ttftP99Ms: 106.227,
        e2eMeanMs: 4332.861,
        itlMeanMs: 8.6411,
        tokenGapsMs: [17.228, 17.812, 18.115, 18.762],
      },
      {
        rate: 10,
        durationS: 600,
        ok: 6000,
        failed: 0,
        promptTokensMean: 593.49,
        ttftMeanMs: 56.679,
        ttftP99Ms: 67.673,
        e2eMeanMs: 4741.816,
        itlMeanMs: 9.4616,
      },
    ],
  },
  {
    id: "llama-2-70b-tp4-roleplay",
    dir: "20260218-084319-llama-2-70b-tp4-roleplay",
    arch: "llama-2-70b",
    tp: 4,
    workload: "roleplay",
    shape: { systemTokens: 150, questionTokens: 600, outputTokens: 251 },
    kvBlocks: 31356,
    stages: [
      {
        rate: 6,
        durationS: 1200,
        ok: 7200,
        failed: 0,
        promptTokensMean: 787.43,
        ttftMeanMs: 54.754,
        ttftP99Ms: 96.264,
        e2eMeanMs: 4561.571,
        itlMeanMs: 8.9558,
      },
    ],
  },
  {
    id: "llama-2-70b-tp4-reasoning",
    dir: "20260218-065057-llama-2-70b-hf-tp4-reasoning",
    arch: "llama-2-70b",
    tp: 4,
    workload: "reasoning",
    shape: { systemTokens: 100, questionTokens: 934, outputTokens: 1448 },
    kvBlocks: 31356,
    overload: true,
    stages: [
      {
        rate: 4,
        durationS: 1200,
        ok: 3200,
        failed: 1600,
        promptTokensMean: 1082.93,
        ttftMeanMs: 118995.821,
        ttftP99Ms: 253549.375,
        e2eMeanMs: 161729.851,
        itlMeanMs: 14.7578,
      },
    ],
  },
  {
    id: "codellama-34b-tp2-general",
    dir: "20260218-150304-codellama-34b-tp2-general",
    arch: "codellama-34b",
    tp: 2,
    workload: "general",
    shape: { systemTokens: 100, questionTokens: 447, outputTokens: 248 },
    kvBlocks: 26602,
    stages: [
      {
        rate: 8,
        durationS: 600,
        ok: 4800,
        failed: 0,
        promptTokensMean: 574.24,
        ttftMeanMs: 46.018,
        ttftP99Ms: 73.436,
        e2eMeanMs: 3694.383,
        itlMeanMs: 7.3373,
        tokenGapsMs: [14.676, 15.104, 15.374, 16.204],
      },
      {
        rate: 20,
        durationS: 600,
        ok: 12000,
        failed: 0,
        promptTokensMean: 574.24,
        ttftMeanMs: 53.818,
        ttftP99Ms: 72.969,
        e2eMeanMs: 4251.79,
        itlMeanMs: 8.4434,
      },
    ],
  },
  {
    id: "codellama-34b-tp2-codegen",
    dir: "20260218-150956-codellama-34b-tp2-codegen",
    arch: "codellama-34b",
    tp: 2,
    workload: "codegen",
    shape: { systemTokens: 100, questionTokens: 466, outputTokens: 247 },
    kvBlocks: 26602,
    stages: [
      {
        rate: 5,
        durationS: 600,
        ok: 3000,
        failed: 0,
        promptTokensMean: 593.37,
        ttftMeanMs: 44.458,
        ttftP99Ms: 69.031,
        e2eMeanMs: 3610.361,
        itlMeanMs: 7.1987,
        tokenGapsMs: [14.438, 14.755, 14.932, 15.342],
      },
      {
        rate: 10,
        durationS: 600,
        ok: 6000,
        failed: 0,
        promptTokensMean: 593.37,
        ttftMeanMs: 46.142,
        ttftP99Ms: 54.883,
        e2eMeanMs: 3779.106,
        itlMeanMs: 7.5374,
      },
    ],
  },
  {
    id: "codellama-34b-tp2-roleplay",
    dir: "20260218-155500-codellama-34b-tp2-roleplay",
    arch: "codellama-34b",
    tp: 2,
    workload: "roleplay",
    shape: { systemTokens: 150, questionTokens: 600, outputTokens: 251 },
    kvBlocks: 26602,
    stages: [
      { rate: 6, durationS: 1200, ok: 7200, failed: 0, promptTokensMean: 786.73, ttftMeanMs: 45.684, ttftP99Ms: 74.875, e2eMeanMs: 3669.731, itlMeanMs: 7.2 },
    ],
  },
  {
    id: "codellama-34b-tp2-reasoning",
    dir: "20260218-160939-codellama-34b-tp2-reasoning",
    arch: "codellama-34b",
    tp: 2,
    workload: "reasoning",
    shape: { systemTokens: 100, questionTokens: 934, outputTokens: 1448 },
    kvBlocks: 26602,
    stages: [
      {
        rate: 4,
        durationS: 1200,
        ok: 4796,
        failed: 4,
        promptTokensMean: 1081.05,
        ttftMeanMs: 120170.871,
        ttftP99Ms: 261228.866,
        e2eMeanMs: 158990.514,
        itlMeanMs: 13.4025,
      },
    ],
  },
  {
    id: "mixtral-8x7b-tp2-general",
    dir: "20260218-130541-mixtral-8x7b-v0-1-tp2-general",
    arch: "mixtral-8x7b",
    tp: 2,
    workload: "general",
    shape: { systemTokens: 100, questionTokens: 447, outputTokens: 248 },
    kvBlocks: 27510,
    stages: [
      {
        rate: 8,
        durationS: 600,
        ok: 4800,
        failed: 0,
        promptTokensMean: 570.68,
        ttftMeanMs: 63.892,
        ttftP99Ms: 383.077,
        e2eMeanMs: 4795.965,
        itlMeanMs: 9.5171,
        tokenGapsMs: [18.947, 19.563, 19.823, 20.558],
      },
      {
        rate: 20,
        durationS: 600,
        ok: 12000,
        failed: 0,
        promptTokensMean: 570.68,
        ttftMeanMs: 70.955,
        ttftP99Ms: 256.029,
        e2eMeanMs: 5135.708,
        itlMeanMs: 10.1898,
      },
    ],
  },
  {
    id: "mixtral-8x7b-tp2-codegen",
    dir: "20260218-120914-mixtral-8x7b-v0-1-tp2-codegen",
    arch: "mixtral-8x7b",
    tp: 2,
    workload: "codegen",
    shape: { systemTokens: 100, questionTokens: 466, outputTokens: 247 },
    kvBlocks: 27510,
    stages: [
      {
        rate: 5,
        durationS: 600,
        ok: 3000,
        failed: 0,
        promptTokensMean: 589.41,
        ttftMeanMs: 63.003,
        ttftP99Ms: 481.588,
        e2eMeanMs: 4518.516,
        itlMeanMs: 8.9971,
        tokenGapsMs: [17.824, 18.57, 18.984, 19.904],
      },
      {
        rate: 10,
        durationS: 600,
        ok: 6000,
        failed: 0,
        promptTokensMean: 589.41,
        ttftMeanMs: 56.781,
        ttftP99Ms: 68.146,
        e2eMeanMs: 4753.587,
        itlMeanMs: 9.4851,
      },
    ],
  },
  {
    id: "mixtral-8x7b-tp2-roleplay",
    dir: "20260218-141024-mixtral-8x7b-v0-1-tp2-roleplay",
    arch: "mixtral-8x7b",
    tp: 2,
    workload: "roleplay",
    shape: { systemTokens: 150, questionTokens: 600, outputTokens: 251 },
    kvBlocks: 27510,
    stages: [
      {
        rate: 6,
        durationS: 1200,
        ok: 7200,
        failed: 0,
        promptTokensMean: 782.25,
        ttftMeanMs: 60.509,
        ttftP99Ms: 85.347,
        e2eMeanMs: 4684.724,
        itlMeanMs: 9.1891,
      },
    ],
  },
  {
    id: "mixtral-8x7b-tp2-reasoning",
    dir: "20260218-135247-mixtral-8x7b-v0-1-tp2-reasoning",
    arch: "mixtral-8x7b",
    tp: 2,
    workload: "reasoning",
    shape: { systemTokens: 100, questionTokens: 934, outputTokens: 1448 },
    kvBlocks: 27510,
    overload: true,
    stages: [
      {
        rate: 4,
        durationS: 1200,
        ok: 1506,
        failed: 3294,
        promptTokensMean: 1075.64,
        ttftMeanMs: 103034.838,
        ttftP99Ms: 239396.01,
        e2eMeanMs: 156420.999,
        itlMeanMs: 18.4323,
      },
    ],
  },
];
