/**
 * Real vLLM runs on A100 and H100 measured with `vllm bench serve`: the
 * vLLM baselines of GPUStack's performance lab (repository gpustack/gpustack,
 * Apache-2.0, commit 1f37f1b8bd79c6b424a0cb55c7abd08a5c2132dc,
 * `docs/performance-lab/<model>/<gpu>.md`, section "Other Benchmark Cases",
 * "Baseline benchmark results"). What is here are the published figures,
 * quoted as facts with the page each comes from.
 *
 * Every run: vLLM v0.11.0 started with its defaults (`vllm serve <model>`,
 * `-tp 8` for Qwen3-235B-A22B), bf16 weights, one node of A100 SXM 80GB or
 * H100 SXM GPUs; the client `vllm bench serve --backend openai-chat
 * --endpoint /v1/chat/completions --dataset-name random --random-input-len L
 * --random-output-len O --num-prompts N` (the pages' four random cases) with
 * no request rate and no concurrency limit: all N requests sent at once, each
 * a prompt of L random tokens of its own (no prefix shared), streamed, asking
 * O tokens without `ignore_eos` (the few answers that stop early show in the
 * published total of generated tokens).
 *
 * Left out of these pages: the ShareGPT runs (only the totals of their
 * 1,000 conversations' lengths are published, not each request's, and a
 * burst's TTFT depends on the order of the long ones), the tuned configs
 * (other engines, FP8 checkpoints), and the models whose architecture the
 * step model lacks: gpt-oss (MXFP4 experts, attention sinks, sliding-window
 * layers), GLM-4.5-Air and GLM-4.6 (a shared expert and dense first layers),
 * DeepSeek-R1/V3.2 (multi-head latent attention), Qwen3.5 (linear-attention
 * layers); Ascend 910B is not a GPU the sim knows.
 */

export const BENCH_SERVE_SOURCE = "github.com/gpustack/gpustack (Apache-2.0, commit 1f37f1b), docs/performance-lab/<page>.md, Other Benchmark Cases";

/** The pages' vLLM and its scheduler: v0.11.0 schedules synchronously unless `--async-scheduling` is given. */
export const BENCH_SERVE_ENGINE = Object.freeze({ vllm: "v0.11.0", asyncScheduling: false });

/**
 * Tokens Qwen3's chat template wraps one user message in: `<|im_start|>user\n`,
 * `<|im_end|>\n` and the generation prompt `<|im_start|>assistant\n`. The
 * client counts the prompt before the template; the engine prefills it after.
 */
export const CHAT_TEMPLATE_TOKENS = 8;

/** The four random cases of the pages: input and output lengths, prompts sent. */
export const BENCH_SERVE_WORKLOADS = {
  "32k": { inputLen: 32_000, outputLen: 100, numPrompts: 100 },
  "4k": { inputLen: 4000, outputLen: 200, numPrompts: 500 },
  "2k": { inputLen: 2000, outputLen: 100, numPrompts: 500 },
  "128": { inputLen: 128, outputLen: 4, numPrompts: 1000 },
} as const;

type BenchServeWorkload = keyof typeof BENCH_SERVE_WORKLOADS;

/**
 * Whether a run counts in the medians. The 128-token case sends 1,000 chat
 * requests at once for 4 tokens each: what bounds it is the API server's own
 * work per request and per streamed chunk, which the step model holds to a
 * constant — Qwen3-14B's took 26.8 s on A100 and 22.7 s on H100, where the
 * prefill alone differs threefold. Shown, not counted, as the published
 * sweeps' client-bound points are.
 */
export function countedBenchServe(run: BenchServeRun): boolean {
  return run.workload !== "128";
}

/** What `vllm bench serve` printed for a run. */
interface BenchServeFigures {
  /** Successful requests. */
  ok: number;
  durationS: number;
  /** Prompt tokens as the client counted them (the random text re-tokenized, before the chat template). */
  inputTokens: number;
  outputTokens: number;
  ttftMeanMs: number;
  ttftP99Ms: number;
  /** Mean over requests of (latency − TTFT) ÷ (tokens − 1). */
  tpotMeanMs: number;
  /** Mean over every gap between streamed chunks of every request (see bench-serve-replay.ts). */
  itlMeanMs: number;
}

export interface BenchServeRun {
  id: string;
  /** The page under docs/performance-lab/. */
  page: string;
  /** A model of model-facts.ts. */
  arch: string;
  /** A GPU of gpu-facts.ts. */
  gpu: string;
  tp: number;
  workload: BenchServeWorkload;
  published: BenchServeFigures;
}

type Figures = [ok: number, durationS: number, inputTokens: number, outputTokens: number, ttftMean: number, ttftP99: number, tpotMean: number, itlMean: number];

function gpustackRun(page: string, arch: string, gpu: string, tp: number, workload: BenchServeWorkload, f: Figures): BenchServeRun {
  const [ok, durationS, inputTokens, outputTokens, ttftMeanMs, ttftP99Ms, tpotMeanMs, itlMeanMs] = f;
  return {
    id: `${arch}-${gpu.startsWith("a100") ? "a100" : gpu}${tp > 1 ? `-tp${tp}` : ""}-random-${workload}`,
    page,
    arch,
    gpu,
    tp,
    workload,
    published: { ok, durationS, inputTokens, outputTokens, ttftMeanMs, ttftP99Ms, tpotMeanMs, itlMeanMs },
  };
}

/**
 * Successful requests, duration (s), total input and generated tokens, TTFT
 * mean and p99, TPOT mean, ITL mean (ms), as printed. The A100 pages name an
 * "A100 SXM 80GB" (Qwen3-14B's "A100 SXM": the same lab's 80 GB machine is
 * assumed). Qwen3-235B-A22B's 128-token case on H100 reports 984 successful
 * requests and 125,650 input tokens: 984 prompts are taken as sent.
 */
export const BENCH_SERVE_RUNS: readonly BenchServeRun[] = [
  gpustackRun("qwen3-14b/a100", "qwen3-14b", "a100-80gb", 1, "32k", [100, 724.56, 3200000, 9891, 359648.08, 714338.15, 445.58, 441.08]),
  gpustackRun("qwen3-14b/a100", "qwen3-14b", "a100-80gb", 1, "4k", [500, 407.05, 1997942, 99783, 197625.03, 396056.32, 254.61, 253.82]),
  gpustackRun("qwen3-14b/a100", "qwen3-14b", "a100-80gb", 1, "2k", [500, 175.66, 998175, 50000, 86908.3, 170607.65, 301.73, 299.28]),
  gpustackRun("qwen3-14b/a100", "qwen3-14b", "a100-80gb", 1, "128", [1000, 26.79, 127698, 4000, 19451.46, 26523.59, 233.35, 175.01]),
  gpustackRun("qwen3-14b/h100", "qwen3-14b", "h100", 1, "32k", [100, 386.8, 3200000, 9855, 191024.43, 380407.97, 277.44, 274.38]),
  gpustackRun("qwen3-14b/h100", "qwen3-14b", "h100", 1, "4k", [500, 227.57, 1997942, 99803, 112716.92, 219749.74, 132.45, 132.11]),
  gpustackRun("qwen3-14b/h100", "qwen3-14b", "h100", 1, "2k", [500, 98.91, 998175, 50000, 50716.13, 94614.51, 206.51, 204.84]),
  gpustackRun("qwen3-14b/h100", "qwen3-14b", "h100", 1, "128", [1000, 22.72, 127698, 4000, 18282.75, 22564.77, 525.31, 393.98]),
  gpustackRun("qwen3-235b-a22b/a100", "qwen3-235b-a22b", "a100-80gb", 8, "32k", [100, 481.89, 3200000, 8191, 240229.05, 475251.39, 298.86, 295.13]),
  gpustackRun("qwen3-235b-a22b/a100", "qwen3-235b-a22b", "a100-80gb", 8, "4k", [500, 255.7, 1997942, 91352, 122190.64, 244882.42, 205.64, 204.69]),
  gpustackRun("qwen3-235b-a22b/a100", "qwen3-235b-a22b", "a100-80gb", 8, "2k", [500, 112.15, 998175, 49632, 54722.5, 106756.03, 190.79, 189.23]),
  gpustackRun("qwen3-235b-a22b/a100", "qwen3-235b-a22b", "a100-80gb", 8, "128", [1000, 17.68, 127698, 4000, 12767.63, 17339.37, 155.16, 116.37]),
  gpustackRun("qwen3-235b-a22b/h100", "qwen3-235b-a22b", "h100", 8, "32k", [100, 141.6, 3200000, 8191, 70409.55, 138084.17, 132.1, 129.44]),
  gpustackRun("qwen3-235b-a22b/h100", "qwen3-235b-a22b", "h100", 8, "4k", [500, 98.99, 1997942, 92185, 47811.58, 93161.32, 68.94, 68.75]),
  gpustackRun("qwen3-235b-a22b/h100", "qwen3-235b-a22b", "h100", 8, "2k", [500, 43.91, 998175, 49500, 21313.79, 40939.0, 101.08, 100.16]),
  gpustackRun("qwen3-235b-a22b/h100", "qwen3-235b-a22b", "h100", 8, "128", [984, 8.83, 125650, 3936, 7042.17, 8721.24, 212.98, 159.73]),
  gpustackRun("qwen3-32b/a100", "qwen3-32b", "a100-80gb", 1, "32k", [100, 1783.59, 3200000, 7699, 890711.38, 1760024.36, 67.87, 64.54]),
  gpustackRun("qwen3-32b/a100", "qwen3-32b", "a100-80gb", 1, "4k", [500, 1141.94, 1997942, 99893, 566579.7, 1116945.95, 96.19, 95.82]),
  gpustackRun("qwen3-32b/a100", "qwen3-32b", "a100-80gb", 1, "2k", [500, 415.71, 998175, 50000, 208397.03, 408103.76, 143.23, 142.07]),
  gpustackRun("qwen3-32b/a100", "qwen3-32b", "a100-80gb", 1, "128", [1000, 49.57, 127698, 4000, 31177.64, 48960.57, 528.57, 396.42]),
  gpustackRun("qwen3-32b/h100", "qwen3-32b", "h100", 1, "32k", [100, 1157.25, 3200000, 7681, 585981.22, 1144686.57, 43.42, 42.86]),
  gpustackRun("qwen3-32b/h100", "qwen3-32b", "h100", 1, "4k", [500, 976.29, 1997942, 99790, 482284.21, 956141.26, 66.61, 66.29]),
  gpustackRun("qwen3-32b/h100", "qwen3-32b", "h100", 1, "2k", [500, 328.04, 998175, 50000, 163909.4, 322980.86, 86.62, 85.97]),
  gpustackRun("qwen3-32b/h100", "qwen3-32b", "h100", 1, "128", [1000, 32.88, 127698, 4000, 21648.67, 32678.31, 1169.72, 877.29]),
];
