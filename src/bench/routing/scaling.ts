/**
 * The 37-capacity experiment scaled to a 2-core machine, and the arithmetic
 * that shows which of its ratios survive. Pure.
 *
 * Every token count (prompt parts, output, each pod's KV cache) is divided
 * by TOKEN_DIVISOR and every rate multiplied by it: the engines do the same
 * work per second (the same prefill and decode tokens a second, so the same
 * load on each pod's compute), in requests that are that many times
 * shorter. Cache ratios are ratios of token counts, so they do not move:
 * the working set against one pod's cache and against the cluster's, a
 * prefix against a question, what a request holds while it runs against
 * the cache. The stages are then cut to STAGE_DIVISOR of their published
 * length — twice the token divisor, so each stage lasts half as many
 * request lifetimes as published: the figures per stage are those of a
 * shorter stage (a backlog that builds has half as long to build), which
 * keeps a run of one policy near 25 s and the bench within 5 minutes.
 */
import { PUBLISHED_SETUP } from "./published-37-capacity.ts";
import type { Stage } from "./shared-prefix-workload.ts";

/** Tokens (and request lifetimes) are this many times smaller than published; rates this many times higher. */
export const TOKEN_DIVISOR = 20;
/** Stages are this many times shorter than published (in simulated seconds). */
export const STAGE_DIVISOR = 40;
/** vLLM's KV block (tokens): the per-pod cache is a whole number of blocks. */
const BLOCK_TOKENS = 16;

export const DEFAULT_PODS = PUBLISHED_SETUP.pods;
/** The published pods' model on their GPUs (llmgw sim-engine --list-profiles). */
export const DEFAULT_PROFILE = "h100x4-llama-3.1-70b";
export const DEFAULT_GROUPS = PUBLISHED_SETUP.groups;
export const DEFAULT_PER_GROUP = PUBLISHED_SETUP.perGroup;
export const DEFAULT_SYSTEM_LEN = PUBLISHED_SETUP.systemLen / TOKEN_DIVISOR;
export const DEFAULT_QUESTION_LEN = PUBLISHED_SETUP.questionLen / TOKEN_DIVISOR;
export const DEFAULT_OUTPUT_LEN = PUBLISHED_SETUP.outputLen / TOKEN_DIVISOR;
/** 461,376 / 20 = 23,068.8, rounded up to whole 16-token blocks (1,442). */
export const DEFAULT_KV_TOKENS = Math.ceil(PUBLISHED_SETUP.kvTokensPerPod / TOKEN_DIVISOR / BLOCK_TOKENS) * BLOCK_TOKENS;

function scaleStage(s: { rate: number; durationS: number }): Stage {
  return { rate: s.rate * TOKEN_DIVISOR, durationS: s.durationS / STAGE_DIVISOR };
}

export const DEFAULT_WARMUP: Stage = scaleStage(PUBLISHED_SETUP.warmup);
export const DEFAULT_STAGES: readonly Stage[] = PUBLISHED_SETUP.stages.map(scaleStage);

/**
 * The experiment at its published size (`--full-size`): the published token
 * counts, KV capacity, rates and stage lengths, nothing divided. Requests
 * live TOKEN_DIVISOR times longer than in the scaled default, so the times
 * the bench sets around them (the drain after the last send, how long the
 * gateway's admission queue keeps a request) are that many times longer too.
 */
export const FULL_SIZE = {
  systemLen: PUBLISHED_SETUP.systemLen,
  questionLen: PUBLISHED_SETUP.questionLen,
  outputLen: PUBLISHED_SETUP.outputLen,
  /** 461,376: already a whole number of 16-token blocks (28,836). */
  kvTokens: Math.ceil(PUBLISHED_SETUP.kvTokensPerPod / BLOCK_TOKENS) * BLOCK_TOKENS,
  warmup: { ...PUBLISHED_SETUP.warmup } as Stage,
  stages: PUBLISHED_SETUP.stages.map((s) => ({ ...s })) as readonly Stage[],
  /** The scaled default's times around a request are multiplied by this at full size. */
  timeFactor: TOKEN_DIVISOR,
} as const;

export interface CacheShape {
  /** Prefix slots of one pod: (cache − what the requests in flight hold) ÷ system prompt, as the report counts them. */
  slotsPerPod: number;
  slotsCluster: number;
  /** Distinct prefixes ÷ the cluster's slots: 83 / 224 = 0.37 published (the experiment's name). */
  workingSetOfCluster: number;
  /** The working set's prefixes ÷ one pod's cache: above 1, no pod can hold every prefix. */
  workingSetOfPod: number;
  /** A prompt's shared tokens ÷ its whole length: what a prefix hit saves of a prefill. */
  sharedShareOfPrompt: number;
}

/**
 * The report's own slot arithmetic: each of `inFlight` requests per pod
 * holds its question and half its answer (the live decode); the rest of the
 * cache holds system prompts.
 */
export function cacheShape(o: {
  pods: number;
  kvTokens: number;
  groups: number;
  systemLen: number;
  questionLen: number;
  outputLen: number;
  inFlightPerPod?: number;
}): CacheShape {
  const inFlight = o.inFlightPerPod ?? PUBLISHED_SETUP.inFlightPerPod;
  const ephemeral = inFlight * (o.questionLen + o.outputLen / 2);
  const slotsPerPod = o.systemLen > 0 ? Math.max(0, Math.floor((o.kvTokens - ephemeral) / o.systemLen)) : Infinity;
  const slotsCluster = slotsPerPod * o.pods;
  return {
    slotsPerPod,
    slotsCluster,
    workingSetOfCluster: o.groups / slotsCluster,
    workingSetOfPod: (o.groups * o.systemLen) / o.kvTokens,
    sharedShareOfPrompt: o.systemLen / (o.systemLen + o.questionLen),
  };
}

/** The published shape, for the report's "published" column. */
export const PUBLISHED_SHAPE: CacheShape = cacheShape({
  pods: PUBLISHED_SETUP.pods,
  kvTokens: PUBLISHED_SETUP.kvTokensPerPod,
  groups: PUBLISHED_SETUP.groups,
  systemLen: PUBLISHED_SETUP.systemLen,
  questionLen: PUBLISHED_SETUP.questionLen,
  outputLen: PUBLISHED_SETUP.outputLen,
});
