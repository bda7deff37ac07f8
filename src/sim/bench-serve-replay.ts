/**
 * The sim-engine against real vLLM runs measured with `vllm bench serve`
 * (pure): each run of `bench-serve-runs.ts` replayed on the engine core on a
 * virtual clock — its GPU, model and tensor-parallel degree with vLLM's
 * defaults, every request sent at once — and measured as that client
 * measures it, in the columns of the other real runs (E2E mean, TTFT mean and
 * p99, ITL mean).
 */
import { mean, percentile } from "./closed-loop.ts";
import { type GroundTruthMetric, replayCore } from "./ground-truth.ts";
import { type OpenLoopRecord, type OpenLoopRequest, runOpenLoop } from "./open-loop.ts";
import { BENCH_SERVE_ENGINE, type BenchServeRun, CHAT_TEMPLATE_TOKENS } from "./profiles/bench-serve-runs.ts";
import type { EfficiencyConstants } from "./profiles/efficiency.ts";
import { findGpu } from "./profiles/gpu-facts.ts";
import { findArch } from "./profiles/model-facts.ts";
import { type DerivedProfile, deriveProfile } from "./profiles/profile.ts";
import { idsPrompt } from "./tokens.ts";

interface BenchServeSimFigures extends Record<GroundTruthMetric, number> {
  ok: number;
  tpot_mean_ms: number;
  duration_s: number;
}

export interface BenchServeComparison {
  run: BenchServeRun;
  /** KV blocks per GPU replayed: the derived sizing, or the least the started engine had (startedEngineBlocks). */
  kvBlocks: number;
  derivedKvBlocks: number;
  preemptions: number;
  /** The published figures in the four columns (E2E derived, see publishedBenchServe). */
  published: Record<GroundTruthMetric, number>;
  sim: BenchServeSimFigures;
  relErr: Record<GroundTruthMetric, number>;
}

/** Qwen3's vocabulary (config.json vocab_size): the random prompts' ids are drawn below it. */
const VOCAB = 151_936;

/** The run's engine: vLLM's defaults on its GPU (scheduler limits, max_model_len from config.json, KV blocks as vLLM sizes them). */
export function benchServeProfile(run: BenchServeRun, efficiency?: EfficiencyConstants): DerivedProfile {
  const gpu = findGpu(run.gpu);
  const arch = findArch(run.arch);
  if (!gpu || !arch) throw new Error(`bench-serve run ${run.id}: unknown GPU or model`);
  return deriveProfile({ gpu, arch, tp: run.tp, dtype: "bf16", efficiency });
}

/** Each request's lengths: the client's mean prompt plus the chat template, and the mean answer the run generated. */
export function benchServeLengths(run: BenchServeRun): { promptTokens: number; outputTokens: number } {
  const p = run.published;
  return { promptTokens: Math.round(p.inputTokens / p.ok) + CHAT_TEMPLATE_TOKENS, outputTokens: Math.round(p.outputTokens / p.ok) };
}

/**
 * Every request at time 0 (`--request-rate inf`, no `--max-concurrency`),
 * each prompt random ids of its own. The ids are drawn (not left out) so the
 * prompt's blocks are hashed: vLLM's prefix cache keeps a preempted
 * request's computed blocks, and its recompute hits them — without it an
 * engine that can hold one 32K prompt and a part of the next would prefill
 * them again and again.
 */
function benchServeRequests(run: BenchServeRun, blockSize: number): OpenLoopRequest[] {
  const { promptTokens, outputTokens } = benchServeLengths(run);
  let s = 0x2545f491;
  const id = () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return 3 + (s % (VOCAB - 3));
  };
  return Array.from({ length: run.published.ok }, (_, n) => ({
    at: 0,
    prompt: idsPrompt(Array.from({ length: promptTokens }, id), blockSize, n),
    outputTokens,
  }));
}

/**
 * The figures as `vllm bench serve` (v0.11, openai-chat) computes them. Its
 * client times TTFT to the first chunk with choices — the assistant role
 * chunk vLLM sends with the first token — and appends a gap to the ITL list
 * for every later chunk: the first token's own chunk (right after the role's)
 * and each token after it, so a request of n tokens has n gaps spanning its
 * first to last token. ITL mean pools every gap of every request:
 * Σ(last − first) ÷ Σ n; TPOT is per request (last − first) ÷ (n − 1),
 * averaged. (Published: 3 ÷ 4 of TPOT at 4 tokens, 199 ÷ 200 at 200.)
 */
export function benchServeFigures(records: readonly OpenLoopRecord[]): BenchServeSimFigures {
  const done = records.filter((r) => r.ok);
  let span = 0;
  let gaps = 0;
  for (const r of done) {
    span += r.lastAt - r.firstAt;
    gaps += r.tokens;
  }
  const ttft = done.map((r) => r.firstAt - r.sentAt);
  return {
    ok: done.length,
    e2e_mean_ms: mean(done.map((r) => r.endAt - r.sentAt)),
    ttft_mean_ms: mean(ttft),
    ttft_p99_ms: percentile(ttft, 0.99),
    itl_mean_ms: gaps > 0 ? span / gaps : NaN,
    tpot_mean_ms: mean(done.filter((r) => r.tokens > 1).map((r) => (r.lastAt - r.firstAt) / (r.tokens - 1))),
    duration_s: Math.max(...done.map((r) => r.endAt)) / 1000,
  };
}

/**
 * The published figures in the four columns. `vllm bench serve` prints no
 * E2E by default; a request's is its TTFT plus TPOT × (n − 1), so the mean
 * is TTFT mean + TPOT mean × (n − 1) when every answer has n tokens — exact
 * where the run generated N × O tokens, within the few answers that stopped
 * early elsewhere.
 */
export function publishedBenchServe(run: BenchServeRun): Record<GroundTruthMetric, number> {
  const p = run.published;
  return {
    e2e_mean_ms: p.ttftMeanMs + p.tpotMeanMs * (p.outputTokens / p.ok - 1),
    ttft_mean_ms: p.ttftMeanMs,
    ttft_p99_ms: p.ttftP99Ms,
    itl_mean_ms: p.itlMeanMs,
  };
}

/**
 * KV blocks the run's engine had at least: vLLM (v0.11,
 * kv_cache_utils.check_enough_kv_cache_memory) refuses to start when its
 * cache cannot hold one sequence of max_model_len, and these engines started
 * with config.json's (40,960 tokens for Qwen3-14B and -32B). Where the
 * derived sizing leaves fewer blocks (Qwen3-32B on one 80 GB GPU: its
 * weights take 61 of the 72 GiB vLLM may use), the run's engine had more.
 */
export function startedEngineBlocks(p: DerivedProfile): number {
  const arch = p.arch.maxPositionEmbeddings;
  return Math.max(p.numGpuBlocks, Math.ceil(arch / p.blockSize));
}

export function replayBenchServeRun(run: BenchServeRun, efficiency?: EfficiencyConstants): BenchServeComparison {
  const derived = benchServeProfile(run, efficiency);
  const blocks = startedEngineBlocks(derived);
  const p = { ...derived, numGpuBlocks: blocks, maxModelLen: Math.min(derived.arch.maxPositionEmbeddings, blocks * derived.blockSize) };
  const core = replayCore(p, BENCH_SERVE_ENGINE.asyncScheduling);
  // The client's timeout (aiohttp, 6 h) is longer than any of these runs.
  const { records } = runOpenLoop(core, 0, benchServeRequests(run, p.blockSize), Infinity);
  const sim = benchServeFigures(records);
  const published = publishedBenchServe(run);
  const relErr = {} as Record<GroundTruthMetric, number>;
  for (const m of Object.keys(published) as GroundTruthMetric[]) relErr[m] = (sim[m] - published[m]) / published[m];
  return { run, kvBlocks: p.numGpuBlocks, derivedKvBlocks: derived.numGpuBlocks, preemptions: core.stats.preemptions, published, sim, relErr };
}
