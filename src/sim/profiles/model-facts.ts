/** Published architecture figures (each model's config.json on its hub page) and the sizes that follow from them. */
import { decoderLayers, type LayerArch, type ModelArch } from "./model-arch.ts";
import { LLAMA_3_3_NEMOTRON_SUPER_49B } from "./nemotron-nas.ts";

/**
 * From each model's config.json (hidden_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads, head_dim — hidden_size ÷ heads
 * where absent —, intermediate_size, vocab_size, tie_word_embeddings,
 * max_position_embeddings, num_local_experts, num_experts_per_tok).
 */
export const ARCHS: readonly ModelArch[] = [
  {
    id: "llama-3.1-8b",
    hfName: "meta-llama/Llama-3.1-8B-Instruct",
    hiddenSize: 4096,
    layers: 32,
    attentionHeads: 32,
    kvHeads: 8,
    headDim: 128,
    intermediateSize: 14336,
    vocabSize: 128_256,
    tiedEmbeddings: false,
    maxPositionEmbeddings: 131_072,
  },
  {
    id: "llama-3.1-70b",
    hfName: "meta-llama/Llama-3.1-70B-Instruct",
    hiddenSize: 8192,
    layers: 80,
    attentionHeads: 64,
    kvHeads: 8,
    headDim: 128,
    intermediateSize: 28672,
    vocabSize: 128_256,
    tiedEmbeddings: false,
    maxPositionEmbeddings: 131_072,
  },
  {
    id: "qwen2.5-0.5b",
    hfName: "Qwen/Qwen2.5-0.5B-Instruct",
    hiddenSize: 896,
    layers: 24,
    attentionHeads: 14,
    kvHeads: 2,
    headDim: 64,
    intermediateSize: 4864,
    vocabSize: 151_936,
    tiedEmbeddings: true,
    maxPositionEmbeddings: 32_768,
  },
  {
    id: "qwen3-8b",
    hfName: "Qwen/Qwen3-8B",
    hiddenSize: 4096,
    layers: 36,
    attentionHeads: 32,
    kvHeads: 8,
    headDim: 128,
    intermediateSize: 12288,
    vocabSize: 151_936,
    tiedEmbeddings: false,
    maxPositionEmbeddings: 40_960,
  },
  {
    id: "qwen3-32b",
    hfName: "Qwen/Qwen3-32B",
    hiddenSize: 5120,
    layers: 64,
    attentionHeads: 64,
    kvHeads: 8,
    headDim: 128,
    intermediateSize: 25600,
    vocabSize: 151_936,
    tiedEmbeddings: false,
    maxPositionEmbeddings: 40_960,
  },
  {
    id: "llama-2-7b",
    hfName: "meta-llama/Llama-2-7b-hf",
    hiddenSize: 4096,
    layers: 32,
    attentionHeads: 32,
    kvHeads: 32,
    headDim: 128,
    intermediateSize: 11008,
    vocabSize: 32_000,
    tiedEmbeddings: false,
    maxPositionEmbeddings: 4096,
  },
  {
    id: "llama-2-70b",
    hfName: "meta-llama/Llama-2-70b-hf",
    hiddenSize: 8192,
    layers: 80,
    attentionHeads: 64,
    kvHeads: 8,
    headDim: 128,
    intermediateSize: 28672,
    vocabSize: 32_000,
    tiedEmbeddings: false,
    maxPositionEmbeddings: 4096,
  },
  {
    id: "codellama-34b",
    hfName: "codellama/CodeLlama-34b-Instruct-hf",
    hiddenSize: 8192,
    layers: 48,
    attentionHeads: 64,
    kvHeads: 8,
    headDim: 128,
    intermediateSize: 22016,
    vocabSize: 32_000,
    tiedEmbeddings: false,
    maxPositionEmbeddings: 16_384,
  },
  {
    id: "mixtral-8x7b",
    hfName: "mistralai/Mixtral-8x7B-v0.1",
    hiddenSize: 4096,
    layers: 32,
    attentionHeads: 32,
    kvHeads: 8,
    headDim: 128,
    intermediateSize: 14336,
    vocabSize: 32_000,
    tiedEmbeddings: false,
    maxPositionEmbeddings: 32_768,
    experts: { count: 8, perToken: 2 },
  },
  LLAMA_3_3_NEMOTRON_SUPER_49B,
  {
    id: "qwen3-14b",
    hfName: "Qwen/Qwen3-14B",
    hiddenSize: 5120,
    layers: 40,
    attentionHeads: 40,
    kvHeads: 8,
    headDim: 128,
    intermediateSize: 17408,
    vocabSize: 151_936,
    tiedEmbeddings: false,
    maxPositionEmbeddings: 40_960,
  },
  {
    // Every layer a mixture of experts (decoder_sparse_step 1, no mlp_only_layers, no shared expert):
    // intermediateSize is config.json's moe_intermediate_size, num_experts 128, num_experts_per_tok 8.
    id: "qwen3-235b-a22b",
    hfName: "Qwen/Qwen3-235B-A22B-Instruct-2507",
    hiddenSize: 4096,
    layers: 94,
    attentionHeads: 64,
    kvHeads: 4,
    headDim: 128,
    intermediateSize: 1536,
    vocabSize: 151_936,
    tiedEmbeddings: false,
    maxPositionEmbeddings: 262_144,
    experts: { count: 128, perToken: 8 },
  },
];

export function findArch(id: string): ModelArch | undefined {
  const key = id.toLowerCase();
  return ARCHS.find((a) => a.id === key || a.hfName.toLowerCase() === key);
}

/** Parameters of one layer's attention: the q, k, v and o projections (none where the layer has no attention). */
function attentionParams(a: ModelArch, l: LayerArch): number {
  if (l.kvHeads === 0) return 0;
  const q = a.hiddenSize * a.attentionHeads * a.headDim;
  const kv = 2 * a.hiddenSize * l.kvHeads * a.headDim;
  const o = a.attentionHeads * a.headDim * a.hiddenSize;
  return q + kv + o;
}

/** Parameters of one gated MLP (gate, up, down); a mixture of experts has `experts.count` of them per layer. */
function mlpParams(a: ModelArch, l: LayerArch): number {
  return 3 * a.hiddenSize * l.intermediateSize;
}

/** A layer's router: one logit per expert from the hidden state (none for a dense model, or a layer without an MLP). */
function routerParams(a: ModelArch, l: LayerArch): number {
  return a.experts && l.intermediateSize > 0 ? a.hiddenSize * a.experts.count : 0;
}

/** Σ over the decoder layers (integers throughout, so a uniform model's sum is exactly layers × one layer). */
function sumLayers(a: ModelArch, f: (l: LayerArch) => number): number {
  let sum = 0;
  for (const l of decoderLayers(a)) sum += f(l);
  return sum;
}

/** Every parameter: embeddings, layers (every expert included; norms are negligible) and the LM head (shared with the embeddings when tied). */
export function totalParams(a: ModelArch): number {
  const embed = a.vocabSize * a.hiddenSize;
  const layers = sumLayers(a, (l) => attentionParams(a, l) + routerParams(a, l) + (a.experts?.count ?? 1) * mlpParams(a, l));
  return embed + layers + (a.tiedEmbeddings ? 0 : embed);
}

/**
 * Parameters a token is multiplied by (2 FLOPs each): the layers' attention,
 * router and the MLPs the router picks for it, and the LM head. The embedding
 * lookup reads only the rows it needs.
 */
export function activeParams(a: ModelArch): number {
  return sumLayers(a, (l) => attentionParams(a, l) + routerParams(a, l) + (a.experts?.perToken ?? 1) * mlpParams(a, l)) + a.vocabSize * a.hiddenSize;
}

/**
 * Parameters every step reads from memory whatever its tokens: the dense
 * layers (a dense model's MLPs included) and the LM head. A mixture of
 * experts reads its experts' MLPs (`expertParams`) only as far as the
 * step's tokens pick them.
 */
export function denseParams(a: ModelArch): number {
  return sumLayers(a, (l) => attentionParams(a, l) + routerParams(a, l) + (a.experts ? 0 : mlpParams(a, l))) + a.vocabSize * a.hiddenSize;
}

/** Every expert MLP of every layer (0 for a dense model). */
export function expertParams(a: ModelArch): number {
  const experts = a.experts;
  return experts ? sumLayers(a, (l) => experts.count * mlpParams(a, l)) : 0;
}

/** Layers with attention: the ones that hold KV cache and compute attention pairs. */
export function attentionLayers(a: ModelArch): number {
  return sumLayers(a, (l) => (l.kvHeads > 0 ? 1 : 0));
}

/** Tensor-parallel all-reduces a token's forward pass makes: one after each layer's attention and one after its MLP. */
export function allReducesPerToken(a: ModelArch): number {
  return sumLayers(a, (l) => (l.kvHeads > 0 ? 1 : 0) + (l.intermediateSize > 0 ? 1 : 0));
}

/** The widest MLP of any layer: the one whose activations peak in a forward pass. */
export function widestIntermediateSize(a: ModelArch): number {
  return Math.max(0, ...decoderLayers(a).map((l) => l.intermediateSize));
}

/**
 * KV-cache bytes per token over the whole model: K and V of every layer that
 * has attention (vLLM's page size per token, vllm/v1/kv_cache_interface.py;
 * a layer without attention registers no KV cache spec).
 */
export function kvBytesPerToken(a: ModelArch, kvDtypeBytes: number): number {
  return sumLayers(a, (l) => 2 * l.kvHeads * a.headDim * kvDtypeBytes);
}

/**
 * KV-cache bytes per token on one GPU of a tensor-parallel group: each GPU
 * holds max(1, kv_heads ÷ tp) heads of every layer (vLLM's LlamaAttention,
 * vllm/model_executor/models/llama.py: with fewer KV heads than GPUs each
 * GPU keeps a copy of one).
 */
export function kvBytesPerTokenPerGpu(a: ModelArch, kvDtypeBytes: number, tp: number): number {
  return sumLayers(a, (l) => (l.kvHeads === 0 ? 0 : 2 * Math.max(1, Math.floor(l.kvHeads / tp)) * a.headDim * kvDtypeBytes));
}
