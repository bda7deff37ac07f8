/**
 * Prompt-prefix hashing for affinity: chained hashes of the leading full
 * blocks of a request's prompt text. Runs on the gateway's main
 * thread for every request, so it reads at most maxBlocks × blockChars
 * characters of the prompt, however long it is.
 */

import { walkPrompt } from "./prompt-walk.ts";

/** Fixed seed for block 0, so hashes are stable across processes and restarts. */
const CHAIN_SEED = 0x6c6c6d6777n; // "llmgw"
/** Hashes are reduced to 53 bits: exact as a JS number, and collisions stay negligible at millions of entries. */
const MASK_53 = (1n << 53n) - 1n;

/**
 * Chained hashes of the leading full blocks of `text`:
 * hash_0 = H(seed, block_0), hash_i = H(hash_{i-1}, block_i), where H is
 * wyhash (Bun.hash.wyhash) over the block's UTF-8 bytes with the previous
 * 64-bit hash as seed. Equal hash_i means equal blocks 0..i (barring
 * collisions), which is what lets one map entry stand for a whole prefix.
 * A trailing partial block is not hashed: it is the part most likely to
 * differ between requests and engines cache whole blocks anyway.
 *
 * `salt` (a LoRA adapter's name) seeds the chain with itself: an engine keys
 * an adapter's blocks by the adapter too (vLLM hashes the LoRA into every
 * block), so the same text under another adapter, or the base model, is
 * another prefix.
 */
export function prefixHashes(text: string, blockChars: number, maxBlocks: number, salt?: string): number[] {
  if (!(blockChars >= 1) || !(maxBlocks >= 1)) return [];
  const blocks = Math.min(Math.floor(maxBlocks), Math.floor(text.length / blockChars));
  const out = new Array<number>(blocks);
  let seed = salt === undefined ? CHAIN_SEED : Bun.hash.wyhash(salt, CHAIN_SEED);
  for (let i = 0; i < blocks; i++) {
    seed = Bun.hash.wyhash(text.slice(i * blockChars, (i + 1) * blockChars), seed);
    out[i] = Number(seed & MASK_53);
  }
  return out;
}

/** The leading prompt text of an OpenAI request body, truncated to `maxChars` (see prompt-walk.ts for its form). */
export function promptText(body: unknown, maxChars = Number.POSITIVE_INFINITY): string {
  return walkPrompt(body, maxChars).text;
}

/** The characters of prompt text that prefix hashing reads at most. */
function prefixTextChars(opts: { readonly blockChars: number; readonly maxBlocks: number }): number {
  return opts.blockChars * opts.maxBlocks;
}

/** promptText + prefixHashes with the config's prefix-affinity options; reads only what it hashes. */
export function requestPrefixHashes(body: unknown, opts: { readonly blockChars: number; readonly maxBlocks: number }): number[] {
  return prefixHashes(promptText(body, prefixTextChars(opts)), opts.blockChars, opts.maxBlocks);
}
