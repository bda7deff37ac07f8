/**
 * The few constants of the step model that are not public figures: how much
 * of a GPU's peak bandwidth and FLOPs a vLLM step reaches, and what a step
 * and a request cost on the host. Fitted once to the published sweeps in
 * `src/sim/profiles/published-sweeps.ts` (`llmgw bench calibrate` shows the
 * error); the same values serve every GPU × model pair.
 */

export interface EfficiencyConstants {
  /** Fraction of peak memory bandwidth a step's weight and KV reads reach. */
  bandwidthEfficiency: number;
  /** Fraction of dense tensor-core peak a step's matmuls and attention reach. */
  computeEfficiency: number;
  /** Per step: scheduling, input preparation, CUDA-graph launch, sampling (ms). */
  stepOverheadMs: number;
  /** Per scheduled sequence per step: the engine core's and the API server's per-token Python work (ms). */
  perSeqOverheadMs: number;
  /** Per request, before the engine sees it: the hand-off from the API server to the engine core (ms, in parallel). */
  frontendLatencyMs: number;
  /** Per request, the API server's own work (parsing, tokenisation), one request at a time: a burst of arrivals queues here (ms). */
  frontendServiceMs: number;
  /** Per hop of a tensor-parallel ring all-reduce (two all-reduces per layer, 2(tp − 1) hops each), its fixed latency (ms). */
  allReduceHopMs: number;
  /** Per GPU, memory neither weights nor KV cache get: CUDA context, NCCL, CUDA graphs (GiB). */
  nonTorchGiB: number;
}

/**
 * Found with `llmgw bench calibrate --fit` (a local search from physically
 * derived starting values) on the three fitted tables (L4 × Qwen2.5-0.5B,
 * H100 × Llama-3.1-8B, and one 8,192-token prefill of Qwen3-32B on two
 * H100s) and rounded. A rerun from them moves them by up to 15 % (the
 * per-sequence cost), trading the fitted tables' medians against their
 * largest errors without changing any table's verdict. The decode figures
 * fix bandwidth and step overhead (a lone decode reads the weights once:
 * 5.1 ms on the L4, 6.5 ms on the H100); the growth of ITL with the batch
 * fixes the per-sequence cost; the long prefill fixes compute efficiency
 * (the small models' short prompts leave it loose: their steps are mostly
 * memory-bound); TTFT under load fixes the API server's time. The roofline takes the larger of a step's
 * memory and compute time: a smooth maximum ((m^p + c^p)^(1/p), p 2 or 3)
 * fitted worse.
 */
export const FITTED: EfficiencyConstants = Object.freeze({
  bandwidthEfficiency: 0.79,
  computeEfficiency: 0.58,
  stepOverheadMs: 1.29,
  perSeqOverheadMs: 0.034,
  frontendLatencyMs: 12,
  frontendServiceMs: 1.4,
  allReduceHopMs: 0.004,
  nonTorchGiB: 1.5,
});
