/**
 * How long one engine step takes, from what it computes (pure). A vLLM V1
 * step is one forward pass over every token the scheduler gave it — one per
 * running decode plus the prefill chunks — so its time follows its
 * composition, not a per-request timer.
 *
 * Derived model (a roofline with host overhead):
 *   step = step_overhead + per_seq × seqs + max(bytes / bandwidth, flops / peak) + TP all-reduces
 * where bytes = weights + KV read by attention and flops = 2 × params × tokens + attention,
 * a mixture of experts' expert FLOPs counted at the rate their shape reaches (expertMatmulEfficiency).
 * Flat model (the sim's older flags, still honoured):
 *   decode part  = itl_ms × (1 + batch_slowdown × running / max_num_seqs)   when the step has decodes
 *   prefill part = prefill_ms_per_token × prefill tokens
 * (prefill_overhead_ms stays what it was, a request's own fixed prefill time
 * in parallel: its first token comes that long after its last chunk, the
 * request holding its slot but no step; see engine-core.ts).
 * Either part may be flat while the other is derived: the derived decode part
 * is the step of the decodes alone, the derived prefill part what the prefill
 * chunks add to it.
 */

/** The API server in front of the engine: what a request costs before the engine core sees it. */
export interface Frontend {
  /** In parallel for every request (ms). */
  latencyMs: number;
  /** One request at a time: arrivals in a burst queue for it (ms). */
  serviceMs: number;
}

export const NO_FRONTEND: Frontend = Object.freeze({ latencyMs: 0, serviceMs: 0 });

/** What one step computes. */
export interface StepComposition {
  /** Sequences scheduled in the step. */
  seqs: number;
  /** Tokens computed in the step (decodes + prefill chunks). */
  tokens: number;
  /** Sequences scheduled for one new token each. */
  decodeSeqs: number;
  /** Context the decodes' attention reads (Σ tokens already in their KV cache). */
  decodeContext: number;
  /** Tokens of prefill chunks. */
  prefillTokens: number;
  /** Sequences with a prefill chunk. */
  prefillSeqs: number;
  /** KV entries the prefill chunks' attention reads (Σ chunk end positions). */
  prefillContext: number;
  /** Causal attention pairs of the prefill chunks (Σ over their tokens of the position). */
  prefillPairs: number;
  /** Requests holding a batch slot (the flat model's load). */
  running: number;
}

export function emptyComposition(): StepComposition {
  return { seqs: 0, tokens: 0, decodeSeqs: 0, decodeContext: 0, prefillTokens: 0, prefillSeqs: 0, prefillContext: 0, prefillPairs: 0, running: 0 };
}

/** The hardware-and-model numbers the derived model needs, per GPU of a tensor-parallel group. */
export interface StepCostModel {
  weightBytes: number;
  kvBytesPerToken: number;
  /** FLOPs per token of every matmul but the experts' (all of a dense model's): 2 × those parameters, per GPU. */
  flopsPerToken: number;
  /** FLOPs per (query token, key position) pair of attention: 4 × layers × heads × head_dim, per GPU. */
  attnFlopsPerPair: number;
  /** Effective bandwidth, bytes per ms. */
  bytesPerMs: number;
  /** Effective compute, FLOPs per ms. */
  flopsPerMs: number;
  stepOverheadMs: number;
  perSeqOverheadMs: number;
  /** Tensor parallelism: all-reduce cost per token (ms) and per step (ms); 0 at tp 1. */
  commMsPerToken: number;
  commMsPerStep: number;
  /** A mixture of experts: its expert MLPs, read as far as the step's tokens pick them (absent: a dense model, all in weightBytes). */
  experts?: ExpertReads;
}

/** A mixture of experts' expert MLPs: what a step reads of their weights and what their matmuls cost. */
export interface ExpertReads {
  /** Every expert's weights, per GPU (tensor parallelism shards each expert). */
  bytes: number;
  count: number;
  perToken: number;
  /** FLOPs per token of the experts it is routed to, per GPU (2 × perToken experts' MLP parameters ÷ tp). */
  flopsPerToken: number;
  /** Intermediate columns of each expert a GPU holds (moe_intermediate_size ÷ tp). */
  columnsPerGpu: number;
  /** What each (token, expert) pair costs beyond its matmul, in columns' worth of it (EfficiencyConstants.expertPairColumns). */
  pairColumns: number;
}

/**
 * Bytes of expert weights a step over `tokens` tokens reads: each layer reads
 * the experts its tokens were routed to, `count × (1 − (1 − perToken/count)^tokens)`
 * of them expected when the router spreads tokens evenly; a lone decode reads
 * perToken of them, a batch of a few dozen tokens nearly all.
 */
export function expertBytesRead(e: ExpertReads, tokens: number): number {
  if (tokens <= 0) return 0;
  return e.bytes * (1 - (1 - e.perToken / e.count) ** tokens);
}

/**
 * Row blocks of vLLM's fused MoE kernel (fused_moe.py, its Triton
 * `fused_moe_kernel`): moe_align_block_size pads each expert's rows to a
 * multiple of BLOCK_SIZE_M, which its configs choose no larger than the rows
 * an expert gets — 16 where there are fewer (get_default_config for
 * M ≤ E; the tuned configs/E=128,N=192,... up to 128 tokens), 64 past a few
 * dozen (get_default_config, and the tuned A100 config at 2,048 tokens).
 */
const MOE_BLOCK_ROWS_MIN = 16;
const MOE_BLOCK_ROWS_MAX = 64;

/**
 * Rows the kernel computes for an expert that gets `rows` of them: padded to
 * its block, half a block lost on average (an expert's share of the step's
 * rows falls anywhere in its last block), a whole block where it gets fewer
 * rows than the smallest block.
 */
export function paddedExpertRows(rows: number): number {
  const block = Math.min(MOE_BLOCK_ROWS_MAX, Math.max(MOE_BLOCK_ROWS_MIN, 2 ** Math.floor(Math.log2(Math.max(1, rows)))));
  return Math.max(MOE_BLOCK_ROWS_MIN, rows + block / 2);
}

/**
 * The fraction of the dense matmuls' rate the experts' matmuls reach in a
 * step over `tokens` tokens (1: as fast). Each expert the step's tokens pick
 * (as many as expertBytesRead reads) computes its rows padded to the
 * kernel's block, and each (token, expert) pair costs besides its matmul a
 * fixed `pairColumns` columns' worth: its hidden state gathered in, its
 * output row written and summed over the token's experts — work of the
 * hidden size, which tensor parallelism does not divide as it divides the
 * columns. With few columns per GPU (Qwen3-235B-A22B at TP 8: 192) that cost
 * dominates; with many (Mixtral-8x7B at TP 2: 7,168) it is a few percent.
 */
export function expertMatmulEfficiency(e: ExpertReads, tokens: number): number {
  if (tokens <= 0) return 1;
  const active = e.count * (1 - (1 - e.perToken / e.count) ** tokens);
  const rows = (tokens * e.perToken) / active;
  return (rows * e.columnsPerGpu) / (paddedExpertRows(rows) * e.columnsPerGpu + rows * e.pairColumns);
}

/** FLOPs of a step over `tokens` tokens, its attention aside, priced at the dense matmuls' rate: the experts' at what their shape reaches. */
function matmulFlops(m: StepCostModel, tokens: number): number {
  const e = m.experts;
  return tokens * m.flopsPerToken + (e && tokens > 0 ? (tokens * e.flopsPerToken) / expertMatmulEfficiency(e, tokens) : 0);
}

/** Weight bytes a step over `tokens` tokens reads: the dense weights once, and the experts its tokens pick. */
function weightsRead(m: StepCostModel, tokens: number): number {
  return m.weightBytes + (m.experts ? expertBytesRead(m.experts, tokens) : 0);
}

function derivedMs(m: StepCostModel, seqs: number, tokens: number, context: number, pairs: number): number {
  if (seqs === 0) return 0;
  const memMs = (weightsRead(m, tokens) + context * m.kvBytesPerToken) / m.bytesPerMs;
  const computeMs = (matmulFlops(m, tokens) + pairs * m.attnFlopsPerPair) / m.flopsPerMs;
  return m.stepOverheadMs + m.perSeqOverheadMs * seqs + Math.max(memMs, computeMs) + m.commMsPerStep + m.commMsPerToken * tokens;
}

/** The whole step, derived. */
export function derivedStepMs(m: StepCostModel, c: StepComposition): number {
  return derivedMs(m, c.seqs, c.tokens, c.decodeContext + c.prefillContext, c.decodeContext + c.prefillPairs);
}

/** The step of its decodes alone, derived. */
export function derivedDecodeMs(m: StepCostModel, c: StepComposition): number {
  return derivedMs(m, c.decodeSeqs, c.decodeSeqs, c.decodeContext, c.decodeContext);
}

export interface FlatDecode {
  itlMs: number;
  batchSlowdown: number;
  maxNumSeqs: number;
}

export interface FlatPrefill {
  msPerToken: number;
}

/** Which model decides each part of a step. */
export interface StepTiming {
  /** Absent: both parts are flat. */
  derived: StepCostModel | undefined;
  /** Multiplies the derived parts (--itl-ms rescales a profile's clock). */
  derivedScale: number;
  /** Present: the decode part is flat. */
  flatDecode: FlatDecode | undefined;
  /** Present: the prefill part is flat. */
  flatPrefill: FlatPrefill | undefined;
}

/** A step never takes less: a busy engine yields to its event loop between steps. */
export const MIN_STEP_MS = 1;

export function stepMs(t: StepTiming, c: StepComposition): number {
  let decode = 0;
  let prefill = 0;
  const m = t.derived;
  if (t.flatDecode) decode = c.decodeSeqs > 0 ? t.flatDecode.itlMs * (1 + t.flatDecode.batchSlowdown * (c.running / Math.max(1, t.flatDecode.maxNumSeqs))) : 0;
  else if (m) decode = t.derivedScale * derivedDecodeMs(m, c);
  if (t.flatPrefill) prefill = t.flatPrefill.msPerToken * c.prefillTokens;
  else if (m && c.prefillTokens > 0) prefill = t.derivedScale * (derivedStepMs(m, c) - derivedDecodeMs(m, c));
  return Math.max(MIN_STEP_MS, decode + prefill);
}

/** A lone decode with a short context: what --itl-ms names. */
export function loneDecodeMs(m: StepCostModel): number {
  return derivedMs(m, 1, 1, 128, 128);
}

/** Of a derived step, the shares its memory reads and its matmuls take of the roofline part, 0..1 (for DCGM's DRAM and tensor activity). */
export function stepShares(m: StepCostModel, c: StepComposition): { memory: number; compute: number } {
  const memMs = (weightsRead(m, c.tokens) + (c.decodeContext + c.prefillContext) * m.kvBytesPerToken) / m.bytesPerMs;
  const computeMs = (matmulFlops(m, c.tokens) + (c.decodeContext + c.prefillPairs) * m.attnFlopsPerPair) / m.flopsPerMs;
  const total = derivedStepMs(m, c);
  return total > 0 ? { memory: Math.min(1, memMs / total), compute: Math.min(1, computeMs / total) } : { memory: 0, compute: 0 };
}
