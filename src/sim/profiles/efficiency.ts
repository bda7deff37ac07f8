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
  /** Per request, before the engine sees it: the API server's parsing, tokenisation and hand-off (ms). */
  frontendMs: number;
  /** Per tensor-parallel all-reduce (two per layer), its fixed latency (ms). */
  allReduceLatencyMs: number;
  /** Per GPU, memory neither weights nor KV cache get: CUDA context, NCCL, CUDA graphs (GiB). */
  nonTorchGiB: number;
}

export const FITTED: EfficiencyConstants = Object.freeze({
  bandwidthEfficiency: 0.8,
  computeEfficiency: 0.55,
  stepOverheadMs: 1.0,
  perSeqOverheadMs: 0.03,
  frontendMs: 8,
  allReduceLatencyMs: 0.008,
  nonTorchGiB: 1.5,
});
