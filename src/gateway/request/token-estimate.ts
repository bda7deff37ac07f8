/**
 * A request's token estimate before it runs: what the quota gate charges up
 * front and settles against the engine's usage afterwards.
 */
import { type PromptWalk, walkPrompt } from "../../scheduling/prompt-walk.ts";

/** Completion tokens assumed when a request names no max_tokens / max_completion_tokens. */
export const DEFAULT_COMPLETION_TOKENS_ESTIMATE = 256;
/**
 * Estimated tokens of a request: ceil(prompt characters / 4) + completion budget × n. Prompt text is the
 * chat messages' string content and text parts, or a completion `prompt` / embeddings `input` (strings;
 * pre-tokenised arrays count one token per id). The completion budget is max_tokens ?? max_completion_tokens
 * ?? DEFAULT_COMPLETION_TOKENS_ESTIMATE, or 0 for an embeddings body (`input` and no messages/prompt).
 */
export function estimateTokens(body: unknown): number {
  return estimateFromWalk(body, walkPrompt(body, 0));
}

/** estimateTokens over a prompt walk already made (the request path walks a body once). */
export function estimateFromWalk(body: unknown, walk: PromptWalk): number {
  if (typeof body !== "object" || body === null) return DEFAULT_COMPLETION_TOKENS_ESTIMATE;
  const b = body as Record<string, unknown>;
  const embeddings = b.input !== undefined && b.messages === undefined && b.prompt === undefined;
  const budget = positiveInt(b.max_tokens) ?? positiveInt(b.max_completion_tokens) ?? (embeddings ? 0 : DEFAULT_COMPLETION_TOKENS_ESTIMATE);
  const n = positiveInt(b.n) ?? 1;
  return promptEstimate(walk) + budget * n;
}

/** The prompt's share of the estimate: ceil(prompt characters / 4) + pre-tokenised ids. */
export function promptEstimate(walk: PromptWalk): number {
  return Math.ceil(walk.chars / 4) + walk.tokenIds;
}

function positiveInt(v: unknown): number | undefined {
  return typeof v === "number" && Number.isInteger(v) && v > 0 ? v : undefined;
}
