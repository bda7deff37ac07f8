/**
 * The torch memory vLLM's profile run peaks at (pure): what
 * `gpu_worker.determine_available_memory` takes off the budget as
 * `torch_peak_increase` before the rest becomes KV cache.
 *
 * The profile run (`gpu_model_runner.profile_run`) is one forward pass of
 * max_num_batched_tokens tokens spread over min(max_num_seqs, tokens) dummy
 * requests (`_dummy_run`), then the sampler on one row of logits per request
 * (`_dummy_sampler_run`, with top-k and top-p set so the costliest path
 * runs); `memory_profiling` records the allocator's peak above what was
 * allocated before (weights and the runner's persistent buffers, which it
 * therefore never counts). The forward's tensors are freed before the
 * sampler runs; only its hidden states are kept, so the peak is the larger
 * of the two, not their sum.
 */
import type { ModelArch } from "./model-arch.ts";
import { widestIntermediateSize } from "./model-facts.ts";

/** The model dtype (bf16): hidden states, MLP activations, the lm_head's logits. */
const ACTIVATION_BYTES = 2;

/**
 * Bytes per logit alive at the sampler's peak in vLLM v0.11's V1 sampler
 * with FlashInfer installed (its default on CUDA through v0.11.0; later
 * versions made the FlashInfer sampler opt-in): the lm_head's
 * logits in the model dtype, still held by `_dummy_sampler_run` (2); the
 * sampler's fp32 copy (`Sampler.forward`, 4; temperature divides it in
 * place); FlashInfer's `top_k_top_p_sampling_from_logits`, which masks the
 * top-k into a new fp32 tensor (4) and softmaxes that (4). The PyTorch
 * fallback sorts the vocabulary (fp32 values and int64 indices) and holds
 * about twice as much.
 */
const SAMPLER_BYTES_PER_LOGIT = 2 + 4 + 4 + 4;

interface ProfileRunInput {
  arch: ModelArch;
  tp: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
}

interface ProfileRunPeak {
  /** The forward pass's peak (bytes per GPU). */
  forwardBytes: number;
  /** The sampler's peak, the forward's kept hidden states included (bytes per GPU). */
  samplerBytes: number;
  /** What vLLM records: the larger of the two. */
  peakBytes: number;
}

export function profileRunPeak({ arch, tp, maxNumSeqs, maxNumBatchedTokens }: ProfileRunInput): ProfileRunPeak {
  const tokens = maxNumBatchedTokens;
  const hidden = tokens * arch.hiddenSize * ACTIVATION_BYTES;
  // A gated MLP (LlamaMLP, Qwen2MLP; fused_moe's per-expert caches alike)
  // peaks at its activation: gate_up_proj's output (2 × intermediate ÷ TP a
  // token) is still alive while SiluAndMul writes its own (intermediate ÷
  // TP), beside the residual stream and the layer's input (hidden each, not
  // split by TP). A mixture of experts holds them for each expert a token is
  // routed to; layers that differ peak at the widest MLP.
  const mlpColumns = (3 * widestIntermediateSize(arch) * (arch.experts?.perToken ?? 1)) / tp;
  const forwardBytes = tokens * (2 * arch.hiddenSize + mlpColumns) * ACTIVATION_BYTES;
  // One row of logits per dummy request; every tensor-parallel rank gathers
  // the whole vocabulary and samples (LogitsProcessor all-gathers on CUDA).
  const requests = Math.min(maxNumSeqs, tokens);
  const samplerBytes = hidden + requests * arch.vocabSize * SAMPLER_BYTES_PER_LOGIT;
  return { forwardBytes, samplerBytes, peakBytes: Math.max(forwardBytes, samplerBytes) };
}
