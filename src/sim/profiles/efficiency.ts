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
  /** Per tensor-parallel all-reduce (two per layer), its fixed latency (ms). */
  allReduceLatencyMs: number;
  /** Per GPU, memory neither weights nor KV cache get: CUDA context, NCCL, CUDA graphs (GiB). */
  nonTorchGiB: number;
}

/**
 * Found with `llmgw bench calibrate --fit` (a local search from physically
 * derived starting values) on the two fitted tables (L4 × Qwen2.5-0.5B,
 * H100 × Llama-3.1-8B) and rounded; a rerun moves them by a few percent
 * without changing any table's verdict. The decode figures fix
 * bandwidth and step overhead (a lone decode reads the weights once: 5.1 ms
 * on the L4, 6.5 ms on the H100); the growth of ITL with the batch fixes the
 * per-sequence cost; TTFT under load fixes compute efficiency and the API
 * server's time.
 */
export const FITTED: EfficiencyConstants = Object.freeze({
  bandwidthEfficiency: 0.81,
  computeEfficiency: 0.4,
  stepOverheadMs: 1.23,
  perSeqOverheadMs: 0.024,
  frontendLatencyMs: 10,
  frontendServiceMs: 2,
  allReduceLatencyMs: 0.008,
  nonTorchGiB: 1.5,
});
