/**
 * Published vLLM measurements the sim-engine is checked against
 * (`llmgw bench calibrate`), each with its source. Quoted from the pages
 * named; figures as published.
 */
import type { ProfileChoice } from "./catalog.ts";

/** A published figure per point; absent where the source does not give it. */
interface PublishedPoint {
  concurrency: number;
  ttftP50Ms?: number;
  itlP50Ms?: number;
  tpotP50Ms?: number;
  outTokS?: number;
  e2eMeanMs?: number;
  /** Output tokens per second relative to the sweep's first point (a source that gives only the ratio). */
  outTokSRelative?: number;
  /** Why this point measures the benchmark client rather than the engine: shown, but left out of the error targets. */
  harnessBound?: string;
}

export interface PublishedSweep {
  id: string;
  title: string;
  source: string;
  profile: ProfileChoice & { maxModelLen?: number };
  /** Prompt and answer lengths replayed (fixed; `ignore_eos`). */
  inputTokens: number;
  outputTokens: number;
  /** How the lengths were chosen when the source does not state them. */
  lengthsNote?: string;
  /** Answers vary uniformly within ± this fraction of outputTokens (a dataset's turns, not ignore_eos); absent: fixed. */
  outputSpread?: number;
  /** Requests per point: the closed loop keeps `concurrency` in flight until this many have been sent. */
  requests: (concurrency: number) => number;
  /** Whether the efficiency constants were fitted to this table (false: a prediction). */
  fitted: boolean;
  /** Whether the measured vLLM scheduled asynchronously (its default since 0.14). */
  asyncScheduling: boolean;
  points: PublishedPoint[];
}

/**
 * The InferenceBench sweep's output rate stops at ~1,350 tokens/s from c=16
 * to c=64 while TTFT p50 stays under 90 ms: an engine at capacity queues new
 * requests, so the limit is the client's. c/1,350 tokens/s gives its TPOT p50
 * at both points (11.6 and 47 ms against 10.9 and 46.9).
 */
const CLIENT_CAP = "the client's ~1,350 tokens/s, not the engine's: throughput flat from c=16 to c=64 at a low TTFT, TPOT p50 ≈ c / 1,350 tokens/s";

export const PUBLISHED_SWEEPS: readonly PublishedSweep[] = [
  {
    id: "l4-qwen2.5-0.5b",
    title: "L4 24 GB · Qwen2.5-0.5B-Instruct BF16 · vLLM 0.23.0",
    source: "ai.wmx.dev/benchmarks (serving/raw-vllm): vllm bench serve, 256 in / 128 out, --ignore-eos, --gpu-memory-utilization 0.6 --max-model-len 8192",
    profile: { profile: "l4-qwen2.5-0.5b" },
    inputTokens: 256,
    outputTokens: 128,
    requests: (c) => Math.max(50, 20 * c),
    fitted: true,
    asyncScheduling: true,
    points: [
      { concurrency: 1, outTokS: 168, ttftP50Ms: 27.0, itlP50Ms: 5.1 },
      { concurrency: 2, outTokS: 367, ttftP50Ms: 37.8, itlP50Ms: 5.2 },
      { concurrency: 4, outTokS: 698, ttftP50Ms: 50.1, itlP50Ms: 5.3 },
      { concurrency: 8, outTokS: 1312, ttftP50Ms: 60.9, itlP50Ms: 5.5 },
      { concurrency: 16, outTokS: 2277, ttftP50Ms: 103.8, itlP50Ms: 6.0 },
      { concurrency: 32, outTokS: 3773, ttftP50Ms: 135.3, itlP50Ms: 7.1 },
    ],
  },
  {
    id: "h100-llama-3.1-8b",
    title: "H100 80GB HBM3 · Llama-3.1-8B-Instruct fp16 · vLLM 0.21.0",
    source: "yobitelcomm.github.io/bench/recipes/concurrency-sweep (InferenceBench llm.inference.chatbot-short, 2026-05-16)",
    profile: { profile: "h100-llama-3.1-8b" },
    inputTokens: 200,
    outputTokens: 64,
    outputSpread: 0.5,
    lengthsNote:
      "not published (\"short chat turns\" from a chat dataset, so of varying length); 200 in and 32–96 out (mean 64) chosen from the table's own Little's-law consistency at c=4 (about 53–64 output tokens per request)",
    requests: (c) => Math.max(50, 20 * c),
    fitted: true,
    asyncScheduling: true,
    points: [
      { concurrency: 1, outTokS: 122.2, ttftP50Ms: 13.98, tpotP50Ms: 6.48 },
      { concurrency: 4, outTokS: 580.3, ttftP50Ms: 22.75, tpotP50Ms: 6.59 },
      { concurrency: 16, outTokS: 1384.2, ttftP50Ms: 41.69, tpotP50Ms: 10.94, harnessBound: CLIENT_CAP },
      { concurrency: 64, outTokS: 1312.3, ttftP50Ms: 86.92, tpotP50Ms: 46.91, harnessBound: CLIENT_CAP },
    ],
  },
  {
    id: "h100-qwen3-8b",
    title: "H100 SXM · Qwen3-8B BF16 · vLLM 0.11.0 (ShareGPT)",
    source:
      "github.com/gpustack/gpustack docs/performance-lab/qwen3-8b/h100-latency.md: vllm bench serve --dataset-name sharegpt --num-prompts 100 (23,260 in / 22,061 out tokens); mean latency per request at batch 1, 2, 4, 8; the full report at concurrency 4",
    profile: { profile: "h100-qwen3-8b" },
    inputTokens: 233,
    outputTokens: 221,
    lengthsNote: "ShareGPT's mean lengths in that run (23,260 / 100 in, 22,061 / 100 out), fixed",
    requests: () => 100,
    fitted: false,
    asyncScheduling: false,
    points: [
      { concurrency: 1, e2eMeanMs: 1660 },
      { concurrency: 2, e2eMeanMs: 1680 },
      { concurrency: 4, e2eMeanMs: 1680, ttftP50Ms: 60.26, tpotP50Ms: 7.4, itlP50Ms: 7.37, outTokS: 496.88 },
      { concurrency: 8, e2eMeanMs: 1780 },
    ],
  },
  {
    id: "a100-40gb-llama-3.1-8b",
    title: "A100 40GB · Llama-3.1-8B-Instruct BF16 · vLLM 0.23.0",
    source:
      'johnmusgrave.com/p/vllm-throughput-latency-sweep-on: vllm bench serve, random 1024 in / 128 out, --ignore-eos, --num-prompts 20×C; decode at C=1 "about 75 tokens/sec", C=8 "a 6.6x gain" in throughput over C=1',
    profile: { profile: "a100-40gb-llama-3.1-8b" },
    inputTokens: 1024,
    outputTokens: 128,
    requests: (c) => 20 * c,
    fitted: false,
    asyncScheduling: true,
    points: [
      { concurrency: 1, tpotP50Ms: 1000 / 75 },
      { concurrency: 8, outTokSRelative: 6.6 },
    ],
  },
  {
    id: "h100x2-qwen3-32b-prefill",
    title: "2 × H100 (TP2) · Qwen3-32B · one uncached 8,192-token prefill (llm-d's calibrate-tau)",
    source:
      "github.com/llm-d/llm-d guides/optimized-baseline/calibration (calibrate-tau.yaml, calibrate.sh): R_peak = 8,192 ÷ the median TTFT of lone 8,192-token prompts of fresh random token ids, max_tokens 1, streamed; its default τ = 15,928 tokens/s × 18 s for Qwen3-32B TP2 on H100 with --max-num-batched-tokens 8192 (llm-d's sticky-until-saturated routing blog): TTFT 8,192 ÷ 15,928 = 514.3 ms",
    profile: { profile: "h100x2-qwen3-32b" },
    inputTokens: 8192,
    outputTokens: 1,
    lengthsNote: "the calibration's own: one full --max-num-batched-tokens chunk, one token out",
    requests: () => 25,
    fitted: true,
    asyncScheduling: true,
    points: [{ concurrency: 1, ttftP50Ms: 8192 / 15.928 }],
  },
];
