/**
 * llm-d's token-aware routing experiment on code generation, as published:
 * its setup and its figures, quoted from the post (llm-d/llm-d.github.io,
 * blog/2026-08-17_sticky-until-saturated-token-aware-routing.mdx). Data only.
 */

export const CODEGEN_SOURCE = "llm-d/llm-d.github.io, blog/2026-08-17_sticky-until-saturated-token-aware-routing.mdx (inference-perf conversation replay)";

/** The published run's shape: 10 vLLM pods of Qwen3-32B, each on 2 × H100 (TP2), max-num-batched-tokens 8192. */
export const CODEGEN_SETUP = {
  pods: 10,
  model: "Qwen/Qwen3-32B",
  /** The sim-engine profile of those pods (llmgw sim-engine --list-profiles). */
  profile: "h100x2-qwen3-32b",
  maxNumBatchedTokens: 8_192,
  /** Prompts reach ~100,000 tokens: the pods ran with a long context (Qwen3's 131,072 with YaRN); the post does not say which. */
  maxModelLen: 131_072,
  /** Concurrency swept from 10 to 100; each point a run of its own on a cold cluster, `concurrency` conversations. */
  concurrency: [10, 20, 30, 40, 50, 60, 70, 80, 90, 100] as readonly number[],
} as const;

/** The post's arms: Kubernetes Service round-robin ("k8") and its prefill-bound matched configuration (prefix-cache affinity, τ = 286,720, + token-load). */
export const CODEGEN_ARMS = [
  { name: "k8 (Kubernetes Service round-robin)", policy: "round-robin", knee: 30, kneeInputTokS: 16_000 },
  { name: "prefix-cache affinity + token-load (llm-d)", policy: "token-aware", knee: 60, kneeInputTokS: 46_000 },
] as const;

/** The matched configuration's input tok/s over round-robin's, each at its knee (46k ÷ 16k, "2.9×"). */
export const CODEGEN_PUBLISHED_GAIN = 46_000 / 16_000;

export const CODEGEN_SUMMARY =
  "code generation (prefill-bound): knee at concurrency 60 for prefix-cache affinity + token-load vs 30 for round-robin, 46k vs 16k input tok/s at the knee (2.9×); TTFT p90 below 40 s through concurrency 60, input tok/s plateauing at ~47k";

/** The policies run when none is named: the published baseline's stand-in, llmgw's default, and llmgw's sticky-until-saturated policy. */
export const CODEGEN_DEFAULT_POLICIES = ["round-robin", "default", "token-aware"] as const;
