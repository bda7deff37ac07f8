/**
 * NVIDIA's pruned Llama models (Nemotron-NAS, config.json model_type
 * "nemotron-nas", vLLM's DeciLMForCausalLM): a neural architecture search
 * kept, per layer, an attention with its own KV-head count or none, and an
 * MLP of its own width. Their config.json lists the layers in
 * `block_configs`; this module turns that list into the sim's per-layer facts.
 */
import type { LayerArch, ModelArch } from "./model-arch.ts";

/**
 * A run of identical `block_configs` entries: how many layers, the
 * attention's `n_heads_in_group` (null: attention.no_op) and the FFN's
 * `ffn_mult` (null: ffn.no_op), in config.json's order.
 */
type BlockRun = readonly [count: number, nHeadsInGroup: number | null, ffnMult: number | null];

/**
 * The MLP width vLLM builds for an `ffn_mult` (nemotron_nas.py,
 * _ffn_mult_to_intermediate_size): ⌊2 × ffn_mult × hidden ÷ 3⌋ rounded up to
 * a multiple of 256 — 5.25 on a hidden size of 8192 is Llama-70B's 28,672.
 */
function ffnMultToIntermediateSize(ffnMult: number, hiddenSize: number): number {
  const size = Math.trunc((2 * ffnMult * hiddenSize) / 3);
  return Math.ceil(size / 256) * 256;
}

/** The layers `block_configs` describes: KV heads are num_attention_heads ÷ n_heads_in_group (DeciLMDecoderLayer). */
function deciLayers(hiddenSize: number, attentionHeads: number, runs: readonly BlockRun[]): LayerArch[] {
  const layers: LayerArch[] = [];
  for (const [count, nHeadsInGroup, ffnMult] of runs) {
    const layer: LayerArch = {
      kvHeads: nHeadsInGroup === null ? 0 : attentionHeads / nHeadsInGroup,
      intermediateSize: ffnMult === null ? 0 : ffnMultToIntermediateSize(ffnMult, hiddenSize),
    };
    for (let i = 0; i < count; i++) layers.push(layer);
  }
  return layers;
}

/**
 * nvidia/Llama-3_3-Nemotron-Super-49B-v1's config.json: hidden_size 8192,
 * num_hidden_layers 80, num_attention_heads 64 (head_dim 128),
 * vocab_size 128,256, untied embeddings, max_position_embeddings 131,072, and
 * its 80 `block_configs` (no entry uses replace_with_linear). 49 layers keep
 * attention, all with 8 KV heads; 31 have none; the MLPs range from 2,816 to
 * 28,672 wide. Read from the copy of that config.json in NVIDIA's NeMo
 * (nemo/collections/llm/gpt/model/llama_nemotron_config.py,
 * LLAMA_33_NEMOTRON_SUPER_49B_HETEROGENEOUS_CONFIG, which names the hub file
 * as its source); 49.87 B parameters follow, the model card's "49B".
 */
const SUPER_49B_BLOCKS: readonly BlockRun[] = [
  [1, 8, 2.625],
  [5, 8, 5.25],
  [2, null, 2.625],
  [3, 8, 5.25],
  [1, null, 3.28125],
  [30, 8, 5.25],
  [1, null, 1.3125],
  [2, null, 2.625],
  [1, null, 1.3125],
  [1, null, 5.25],
  [1, null, 1.3125],
  [1, null, 2.625],
  [3, null, 1.3125],
  [1, 8, 5.25],
  [1, null, 1.3125],
  [2, null, 1],
  [1, null, 1.3125],
  [3, null, 1],
  [2, null, 1.3125],
  [2, null, 0.5],
  [2, null, 1],
  [2, null, 0.5],
  [1, null, 1],
  [2, null, 0.5],
  [9, 8, 5.25],
];

export const LLAMA_3_3_NEMOTRON_SUPER_49B: ModelArch = {
  id: "llama-3.3-nemotron-super-49b",
  hfName: "nvidia/Llama-3_3-Nemotron-Super-49B-v1",
  hiddenSize: 8192,
  layers: 80,
  attentionHeads: 64,
  headDim: 128,
  vocabSize: 128_256,
  tiedEmbeddings: false,
  maxPositionEmbeddings: 131_072,
  perLayer: deciLayers(8192, 64, SUPER_49B_BLOCKS),
  source: "config.json block_configs, as copied in NVIDIA NeMo's nemo/collections/llm/gpt/model/llama_nemotron_config.py",
};
