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
  /** Per (token, expert) pair of a mixture of experts, what the fused MoE kernels cost beyond its matmul, in columns of that matmul (step-time.ts, expertMatmulEfficiency). */
  expertPairColumns: number;
  /**
   * Per GPU, the non-torch memory vLLM's profile run adds (memory_profiling's
   * non_torch_increase: kernels loaded on first use, NCCL's buffers on the
   * first collective, attention workspaces), in GiB. Not the CUDA context
   * (in the worker's first snapshot) nor CUDA graphs (captured after the KV
   * cache is sized, so the engine never subtracts them).
   */
  nonTorchGiB: number;
}

/**
 * Found with `llmgw bench calibrate --fit` (a coordinate search, each table
 * held to its target) on the three fitted tables (L4 × Qwen2.5-0.5B, H100 ×
 * Llama-3.1-8B, one 8,192-token prefill of Qwen3-32B on two H100s) and the
 * fit set of BLIS's real runs (general and codegen: Llama-2-7B, Llama-2-70B
 * TP4, CodeLlama-34B TP2, Mixtral-8x7B TP2 on H100), started from values
 * read off those runs, and rounded. By hand after the search: the API
 * server's latency 7.2 → 9 ms and its serial share 0 → 1 ms — the search
 * replays a fifth of each run, where tails are shorter, and left the
 * full-length runs' TTFT p99 at 22.8 % against its 20 % target; a zero serial
 * share would drop the API server's queue that bursts meet — and the costs
 * per step and per sequence 1.71 → 1.75 and 0.015 → 0.02 ms, which brings
 * the L4's throughput at c=32 and the H100's at c=1 inside 20 % (+20.3 and
 * +20.0 % before) and moves no real run's median by more than half a point. The real runs
 * fix bandwidth, the per-step cost and the all-reduce hops (their four
 * models read 13 to 46 GB per GPU per step at TP 1, 2 and 4: 7.2 to 19 ms a
 * token); the long prefill fixes compute efficiency; the real runs' TTFT,
 * one async-scheduling step after the prefill's, fixes the API server's
 * time. The roofline takes the larger of a step's memory and compute time:
 * a smooth maximum ((m^p + c^p)^(1/p), p 2 or 3) fitted worse; hiding the
 * host costs behind the GPU's (async scheduling's overlap) fitted worse too
 * (see docs/sim-engine.md).
 */
export const FITTED: EfficiencyConstants = Object.freeze({
  bandwidthEfficiency: 0.91,
  computeEfficiency: 0.63,
  stepOverheadMs: 1.75,
  perSeqOverheadMs: 0.02,
  frontendLatencyMs: 9,
  frontendServiceMs: 1,
  allReduceHopMs: 0.0041,
  // Fitted apart, by hand: vLLM measures it and nothing in its code fixes it.
  // With the profile run's torch peak as vLLM's code makes it
  // (profile-run-memory.ts), 1.0 centres BLIS's four engines (H100, vLLM
  // 0.15, TP 1, 2 and 4) on the KV blocks they reported: Llama-2-7B −0.6 %,
  // Llama-2-70B +0.4 %, CodeLlama-34B +0.3 %, Mixtral-8x7B +0.5 %. Their
  // residuals want about 0.7 GiB at TP 1 and 1.1 GiB at TP 2 and 4 (NCCL);
  // one constant keeps all four within 0.6 %.
  nonTorchGiB: 1.0,
  // Fitted apart, after the search above and by hand: the one constant of the
  // experts' matmuls, on the six counted Qwen3-235B-A22B runs at TP 8 of
  // GPUStack's lab (bench-serve-runs.ts; 192 columns per GPU, 128 rows an
  // expert a step on A100, 512 on H100), the only mixture of experts whose
  // columns per GPU are few enough for it to matter. 500 to 600 give the same
  // mean error on those runs (A100 wants ~650, H100 ~450); 550 gives the
  // lowest medians over every real row. Checked, not fitted, on BLIS's
  // Mixtral-8x7B TP 2 runs (7,168 columns per GPU), which move by under half a
  // point but for one stage's TTFT p99 (+106.7 → +102.4 %).
  expertPairColumns: 550,
});
