/**
 * How much of a request's prompt an endpoint likely holds in its prefix
 * cache, as a fraction in [0,1]: what the engine's KV-cache events say where
 * its stream is live and the prompt was tokenized (the fraction of the
 * prompt's 16-token blocks it holds from the first), else what the prefix
 * index says (the fraction of the prompt's hashed leading blocks last routed
 * there). The prefix index hashes only the head of a prompt, so for a long
 * prompt it says "this conversation was here", and the fraction is then
 * read as the share of the whole prompt held.
 */
import type { EndpointView, RequestView, SchedulingContext } from "./types.ts";

export function cachedShare(req: RequestView, e: EndpointView, ctx: SchedulingContext): number {
  const keys = req.tokenBlockKeys;
  if (keys !== undefined && keys.length > 0 && ctx.kvIndex.live(e.index)) return ctx.kvIndex.matchedBlocks(keys, e.index) / keys.length;
  const hashes = req.prefixHashes;
  return hashes.length === 0 ? 0 : ctx.prefixIndex.matchedBlocks(hashes, e.index) / hashes.length;
}

/** The prompt tokens endpoint `e` likely lacks: what it would prefill for the request. */
export function uncachedTokens(req: RequestView, e: EndpointView, ctx: SchedulingContext): number {
  const prompt = req.promptTokens ?? 0;
  return prompt > 0 ? Math.round(prompt * (1 - cachedShare(req, e, ctx))) : 0;
}
