/**
 * The names of the scheduling plugins config may refer to. The registry in
 * src/scheduling/plugin-registry.ts is typed as a Record over these unions, so a
 * plugin added there without a name here (or the reverse) fails to compile.
 */
export const FILTER_NAMES = ["serves-model", "serves-adapter", "ready", "not-draining", "circuit-closed", "gpu-healthy", "cache-affinity"] as const;
export const SCORER_NAMES = [
  "queue-depth",
  "kv-cache",
  "inflight",
  "prefix-affinity",
  "prefix-rendezvous",
  "precise-prefix",
  "lora-affinity",
  "token-load",
] as const;
export const PICKER_NAMES = ["max-score", "random", "round-robin"] as const;

export type FilterName = (typeof FILTER_NAMES)[number];
export type ScorerName = (typeof SCORER_NAMES)[number];
export type PickerName = (typeof PICKER_NAMES)[number];

/**
 * The APIs the data plane routes (an endpoint's `routes`, the `route` label
 * of the request metrics in src/metrics/names.ts): OpenAI's routes and the
 * rest of vLLM's. Paths in docs/gateway.md.
 */
export const ROUTE_NAMES = [
  "chat",
  "completions",
  "embeddings",
  "responses",
  "messages",
  "count_tokens",
  "tokenize",
  "detokenize",
  "score",
  "rerank",
  "pooling",
  "classify",
  "transcriptions",
] as const;
export type RouteName = (typeof ROUTE_NAMES)[number];
