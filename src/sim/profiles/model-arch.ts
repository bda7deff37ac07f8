/**
 * The shape of a model as the sim-engine derives from it: the figures every
 * config.json gives, and its decoder layers, alike or each its own.
 */

/** What every model's config.json gives, whether its layers are alike or not. */
interface ArchFacts {
  /** The name `--arch` takes. */
  id: string;
  /** The hub repository the figures come from. */
  hfName: string;
  hiddenSize: number;
  /** num_hidden_layers. */
  layers: number;
  attentionHeads: number;
  headDim: number;
  vocabSize: number;
  tiedEmbeddings: boolean;
  /** max_position_embeddings: vLLM's default max_model_len. */
  maxPositionEmbeddings: number;
  /**
   * A mixture of experts (config.json num_local_experts, num_experts_per_tok):
   * every layer's MLP is `count` gated MLPs of its intermediate size each, of
   * which a router picks `perToken` for each token. Absent: a dense MLP.
   */
  experts?: { count: number; perToken: number };
}

/** One decoder layer's shape: its attention's KV heads and its MLP's width. */
export interface LayerArch {
  /** KV heads of its attention; 0: the layer has no attention, hence no KV cache (a pruned model's attention.no_op). */
  kvHeads: number;
  /** Intermediate size of its gated MLP; 0: the layer has no MLP (ffn.no_op). */
  intermediateSize: number;
}

/** Every layer alike: config.json's num_key_value_heads and intermediate_size hold for each. */
interface UniformArch extends ArchFacts {
  kvHeads: number;
  intermediateSize: number;
  perLayer?: undefined;
}

/**
 * Layers that differ (a pruned architecture such as NVIDIA's Nemotron-NAS
 * models, whose config.json has `block_configs`, one per layer): `perLayer`
 * holds `layers` entries, and every size model-facts.ts derives is summed
 * over them.
 */
interface PerLayerArch extends ArchFacts {
  perLayer: readonly LayerArch[];
  /** Where the per-layer figures were read. */
  source: string;
}

export type ModelArch = UniformArch | PerLayerArch;

/** A model's decoder layers: its own list where they differ, else `layers` alike ones. */
export function decoderLayers(a: ModelArch): readonly LayerArch[] {
  if (a.perLayer) return a.perLayer;
  const layer: LayerArch = { kvHeads: a.kvHeads, intermediateSize: a.intermediateSize };
  return Array.from({ length: a.layers }, () => layer);
}
