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
}

/** From each model's config.json (hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size, tie_word_embeddings, max_position_embeddings). */
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
];

export function findArch(id: string): ModelArch | undefined {
  const key = id.toLowerCase();
  return ARCHS.find((a) => a.id === key || a.hfName.toLowerCase() === key);
}

/** Parameters of one decoder layer: attention projections (q, k, v, o) and the gated MLP (gate, up, down); norms are negligible. */
function layerParams(a: ModelArch): number {
  const q = a.hiddenSize * a.attentionHeads * a.headDim;
  const kv = 2 * a.hiddenSize * a.kvHeads * a.headDim;
  const o = a.attentionHeads * a.headDim * a.hiddenSize;
  const mlp = 3 * a.hiddenSize * a.intermediateSize;
  return q + kv + o + mlp;
}

/** Every parameter: embeddings, layers and the LM head (shared with the embeddings when tied). */
export function totalParams(a: ModelArch): number {
  const embed = a.vocabSize * a.hiddenSize;
  return embed + a.layers * layerParams(a) + (a.tiedEmbeddings ? 0 : embed);
}

/**
 * Parameters a forward pass multiplies by (2 FLOPs each per token) and reads
 * from memory once per step: the layers and the LM head. The embedding
 * lookup reads only the rows it needs.
 */
export function matmulParams(a: ModelArch): number {
  return a.layers * layerParams(a) + a.vocabSize * a.hiddenSize;
}

/** KV-cache bytes per token over the whole model: K and V per layer (vLLM's page size per token, vllm/v1/kv_cache_interface.py). */
export function kvBytesPerToken(a: ModelArch, kvDtypeBytes: number): number {
  return 2 * a.layers * a.kvHeads * a.headDim * kvDtypeBytes;
}
