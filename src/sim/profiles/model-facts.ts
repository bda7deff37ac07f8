/** Published architecture figures (each model's config.json on its hub page) and the sizes that follow from them. */

export interface ModelArch {
  /** The name `--arch` takes. */
  id: string;
  /** The hub repository the figures come from. */
  hfName: string;
  hiddenSize: number;
  layers: number;
  attentionHeads: number;
  kvHeads: number;
  headDim: number;
  intermediateSize: number;
  vocabSize: number;
  tiedEmbeddings: boolean;
  /** max_position_embeddings: vLLM's default max_model_len. */
  maxPositionEmbeddings: number;
  /**
   * A mixture of experts (config.json num_local_experts, num_experts_per_tok):
   * every layer's MLP is `count` gated MLPs of `intermediateSize` each, of
   * which a router picks `perToken` for each token. Absent: a dense MLP.
   */
  experts?: { count: number; perToken: number };
}

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
];

export function findArch(id: string): ModelArch | undefined {
  const key = id.toLowerCase();
  return ARCHS.find((a) => a.id === key || a.hfName.toLowerCase() === key);
}

/** Parameters of one layer's attention: the q, k, v and o projections. */
function attentionParams(a: ModelArch): number {
  const q = a.hiddenSize * a.attentionHeads * a.headDim;
  const kv = 2 * a.hiddenSize * a.kvHeads * a.headDim;
  const o = a.attentionHeads * a.headDim * a.hiddenSize;
  return q + kv + o;
}

/** Parameters of one gated MLP (gate, up, down); a mixture of experts has `experts.count` of them per layer. */
function mlpParams(a: ModelArch): number {
  return 3 * a.hiddenSize * a.intermediateSize;
}

/** A layer's router: one logit per expert from the hidden state (none for a dense model). */
function routerParams(a: ModelArch): number {
  return a.experts ? a.hiddenSize * a.experts.count : 0;
}

/** Parameters of one decoder layer, every expert's included; norms are negligible. */
function layerParams(a: ModelArch): number {
  return attentionParams(a) + routerParams(a) + (a.experts?.count ?? 1) * mlpParams(a);
}

/** Every parameter: embeddings, layers and the LM head (shared with the embeddings when tied). */
export function totalParams(a: ModelArch): number {
  const embed = a.vocabSize * a.hiddenSize;
  return embed + a.layers * layerParams(a) + (a.tiedEmbeddings ? 0 : embed);
}

/**
 * Parameters a token is multiplied by (2 FLOPs each): the layers' attention,
 * router and the MLPs the router picks for it, and the LM head. The embedding
 * lookup reads only the rows it needs.
 */
export function activeParams(a: ModelArch): number {
  return a.layers * (attentionParams(a) + routerParams(a) + (a.experts?.perToken ?? 1) * mlpParams(a)) + a.vocabSize * a.hiddenSize;
}

/**
 * Parameters every step reads from memory whatever its tokens: the dense
 * layers (a dense model's MLPs included) and the LM head. A mixture of
 * experts reads its experts' MLPs (`expertParams`) only as far as the
 * step's tokens pick them.
 */
export function denseParams(a: ModelArch): number {
  return a.layers * (attentionParams(a) + routerParams(a) + (a.experts ? 0 : mlpParams(a))) + a.vocabSize * a.hiddenSize;
}

/** Every expert MLP of every layer (0 for a dense model). */
export function expertParams(a: ModelArch): number {
  return a.experts ? a.layers * a.experts.count * mlpParams(a) : 0;
}

/** KV-cache bytes per token over the whole model: K and V per layer (vLLM's page size per token, vllm/v1/kv_cache_interface.py). */
export function kvBytesPerToken(a: ModelArch, kvDtypeBytes: number): number {
  return 2 * a.layers * a.kvHeads * a.headDim * kvDtypeBytes;
}
