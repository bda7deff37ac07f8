/** Counters and histograms the sim-engine keeps for /metrics and /sim/state (engine-wide). */
import { buckets125, Histogram, ITERATION_TOKEN_BUCKETS, ITL_BUCKETS_S, PARAMS_N_BUCKETS, REQUEST_LATENCY_BUCKETS_S, TTFT_BUCKETS_S } from "./histogram.ts";

/** vLLM v1's FinishReason labels (vllm/v1/engine/__init__.py). */
type FinishedReason = "stop" | "length" | "abort";

export class EngineStats {
  requestsTotal = 0;
  disconnects = 0;
  promptTokens = 0;
  generationTokens = 0;
  prefixQueries = 0;
  prefixHits = 0;
  /**
   * Lookups of requests coming back after a preemption, apart from the
   * others as vLLM's PrefixCacheStats keeps them (preempted_requests,
   * preempted_queries: their tokens then, prompt and output; preempted_hits):
   * its prefix-cache counters count first admissions only.
   */
  readonly preemptedPrefix = { requests: 0, queries: 0, hits: 0 };
  preemptions = 0;
  readonly success: Record<FinishedReason, number> = { stop: 0, length: 0, abort: 0 };
  readonly ttft = new Histogram(TTFT_BUCKETS_S);
  readonly itl = new Histogram(ITL_BUCKETS_S);
  readonly tpot = new Histogram(ITL_BUCKETS_S);
  readonly e2e = new Histogram(REQUEST_LATENCY_BUCKETS_S);
  readonly queue = new Histogram(REQUEST_LATENCY_BUCKETS_S);
  readonly prefill = new Histogram(REQUEST_LATENCY_BUCKETS_S);
  readonly decode = new Histogram(REQUEST_LATENCY_BUCKETS_S);
  readonly inference = new Histogram(REQUEST_LATENCY_BUCKETS_S);
  readonly promptLen: Histogram;
  readonly generationLen: Histogram;
  /** Per step: the prompts of requests whose prefill ended in it plus the tokens it generated (vLLM's iteration_tokens_total). */
  readonly iterationTokens = new Histogram(ITERATION_TOKEN_BUCKETS);
  readonly paramsN = new Histogram(PARAMS_N_BUCKETS);
  readonly paramsMaxTokens: Histogram;
  /** Generated tokens in a sliding second, for throughput gauges. */
  private tokenWindow: { at: number; tokens: number }[] = [];

  constructor(maxModelLen: number) {
    this.promptLen = new Histogram(buckets125(maxModelLen));
    this.generationLen = new Histogram(buckets125(maxModelLen));
    this.paramsMaxTokens = new Histogram(buckets125(maxModelLen));
  }

  /** A request was scheduled for the first time after `queuedMs` in the queue, with `cached` of its prompt tokens in the prefix cache. */
  noteScheduled(queuedMs: number, promptTokens: number, cached: number): void {
    this.queue.observe(queuedMs / 1000);
    this.prefixQueries += promptTokens;
    this.prefixHits += cached;
    this.promptTokens += promptTokens;
    this.promptLen.observe(promptTokens);
  }

  /** A preempted request was admitted again with `tokens` tokens, `hits` of them found in the prefix cache. */
  noteResumed(tokens: number, hits: number): void {
    this.preemptedPrefix.requests++;
    this.preemptedPrefix.queries += tokens;
    this.preemptedPrefix.hits += hits;
  }

  /** Record a decode step's tokens (for the generation throughput gauge). */
  noteStepTokens(now: number, tokens: number): void {
    if (tokens === 0) return;
    this.tokenWindow.push({ at: now, tokens });
    if (this.tokenWindow.length > 512) this.trim(now);
  }

  /** Generated tokens per second over the last few seconds. */
  generationThroughput(now: number): number {
    this.trim(now);
    let n = 0;
    for (const w of this.tokenWindow) n += w.tokens;
    return n / (THROUGHPUT_WINDOW_MS / 1000);
  }

  private trim(now: number): void {
    const cutoff = now - THROUGHPUT_WINDOW_MS;
    let i = 0;
    while (i < this.tokenWindow.length && this.tokenWindow[i]!.at < cutoff) i++;
    if (i > 0) this.tokenWindow = this.tokenWindow.slice(i);
  }
}

const THROUGHPUT_WINDOW_MS = 5_000;
