/**
 * The sim-engine's tokenizer and chat template: deterministic token ids,
 * the same in every sim process for the same text, from which the prompt's
 * length, its prefix-cache block hashes and the token ids of its KV-cache
 * events all follow (one definition).
 *
 * - Text is cut into tokens of 4 UTF-16 units (the last one shorter), about
 *   what BPE tokenizers give for English. A token whose characters are all
 *   ASCII (1–127) packs them into its id, 7 bits each — id < 2^28, and
 *   /detokenize gives the text back; any other token's id is
 *   2^28 + a 28-bit hash of its characters (detokenized as U+FFFD).
 * - Words the model itself generated at the end of a context (a
 *   continuation's prefill) are one token each, as they were generated:
 *   id 2^29 + the word's vocabulary index.
 * - Chat messages are rendered `<|role|>\ncontent\n` per message, then the
 *   generation prompt `<|assistant|>\n` (or nothing, or the final message
 *   left open: see ChatEnding), and the rendered text is tokenized.
 * - There are no special tokens (no BOS): `add_special_tokens` changes
 *   nothing.
 *
 * Block hashes chain over token ids as vLLM's do (hash_block_tokens):
 * block j's hash is wyhash of its ids seeded with block j-1's hash, and
 * block 0's with the engine's root hash — random per process unless
 * PYTHONHASHSEED is set, as vLLM's NONE_HASH. So two sim processes give
 * the same text the same ids and different block hashes, as two vLLM
 * processes do: a consumer of their events must key blocks by tokens.
 */
import { extendState, readContext, seedState, VOCAB, VOCAB_INDEX } from "./text-model.ts";

export const CHARS_PER_TOKEN = 4;

/** Ids below this pack up to four ASCII characters, 7 bits each. */
const HASHED_BASE = 2 ** 28;
/** Ids from here are the model's own words (continued output). */
export const WORD_BASE = 2 ** 29;
/** One past the largest token id the sim produces. */
export const VOCAB_END = WORD_BASE + VOCAB.length;
const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** A prompt as the engine sees it: its tokens, its full-block hash chain (for the prefix cache) and the model state after it. */
export interface PromptTokens {
  count: number;
  /** The prompt's token ids (what /tokenize answers, and what BlockStored events carry); empty where only the count matters (the calibration bench, with no block hashes). */
  ids: Int32Array;
  /** Chained hashes of the prompt's full KV blocks, in order (block j's hash covers blocks 0..j). */
  blockHashes: bigint[];
  /** The text model's state after the prompt: the output follows from it (SimOutput). */
  state: number;
  /** Tokens at the end of the prompt the model generated itself (a continuation's delivered text); 0 for a fresh request. */
  continued: number;
  /** The model state before those continued tokens: the answer's natural length is drawn from it, so a continuation ends where the answer would. */
  baseState?: number;
}

export function countTextTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

/** The id of the token text[from, to) (at most 4 UTF-16 units). */
function chunkId(text: string, from: number, to: number): number {
  let packed = 0;
  let ascii = true;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c === 0 || c > 127) {
      ascii = false;
      break;
    }
    packed |= c << (7 * (i - from));
  }
  if (ascii) return packed;
  let h = FNV_OFFSET;
  for (let i = from; i < to; i++) h = Math.imul(h ^ text.charCodeAt(i), FNV_PRIME);
  return HASHED_BASE + ((h >>> 0) & (HASHED_BASE - 1));
}

/** Token ids of plain text (no continued words): ceil(length / 4) of them. */
export function textTokenIds(text: string): Int32Array {
  const n = countTextTokens(text);
  const ids = new Int32Array(n);
  for (let t = 0; t < n; t++) ids[t] = chunkId(text, t * CHARS_PER_TOKEN, Math.min(text.length, (t + 1) * CHARS_PER_TOKEN));
  return ids;
}

/** The text of one token id; undefined for an id the sim never produces. */
export function tokenText(id: number): string | undefined {
  if (!Number.isInteger(id) || id < 0 || id >= VOCAB_END) return undefined;
  if (id >= WORD_BASE) return VOCAB[id - WORD_BASE];
  if (id >= HASHED_BASE) return "\uFFFD";
  let s = "";
  for (let k = 0; k < 4; k++) {
    const c = (id >>> (7 * k)) & 0x7f;
    if (c !== 0) s += String.fromCharCode(c);
  }
  return s;
}

/**
 * How the chat template ends: with the generation prompt (the default), with
 * nothing (add_generation_prompt: false), or with the final message left
 * open so the model continues it (continue_final_message: true).
 */
export type ChatEnding = "generation-prompt" | "none" | "continue-final";

/** Chat template stand-in: role markers around each message, then the ending. */
export function renderChat(messages: readonly { role: string; content: string }[], ending: ChatEnding = "generation-prompt"): string {
  let out = "";
  const last = messages.length - 1;
  for (let i = 0; i <= last; i++) {
    const m = messages[i]!;
    out += ending === "continue-final" && i === last ? `<|${m.role}|>\n${m.content}` : `<|${m.role}|>\n${m.content}\n`;
  }
  return ending === "generation-prompt" ? out + "<|assistant|>\n" : out;
}

/** The root of a block-hash chain: vLLM's NONE_HASH, random per process unless PYTHONHASHSEED fixes it. */
export function blockHashRoot(pythonHashSeed: string | undefined): bigint {
  if (pythonHashSeed !== undefined && pythonHashSeed !== "") return Bun.hash.wyhash(`PYTHONHASHSEED:${pythonHashSeed}`);
  return crypto.getRandomValues(new BigUint64Array(1))[0]!;
}

/** Chained hashes of the full blocks of `ids` (block j's hash seeded with block j-1's; block 0's with `root`). */
export function blockHashChain(ids: Int32Array, blockSize: number, root: bigint): bigint[] {
  const full = Math.floor(ids.length / blockSize);
  const out = new Array<bigint>(full);
  const bytes = new Uint8Array(ids.buffer, ids.byteOffset, ids.byteLength);
  let prev = root;
  for (let j = 0; j < full; j++) {
    prev = Bun.hash.wyhash(bytes.subarray(j * blockSize * 4, (j + 1) * blockSize * 4), prev);
    out[j] = prev;
  }
  return out;
}

/** Tokens, full-block hash chain and model state of a text prompt. */
export function textPrompt(text: string, blockSize: number, seed?: number, root = 0n): PromptTokens {
  const ctx = readContext(text, seed);
  // The continued words are not re-split into 4-character tokens: they were generated one word per token.
  const base = textTokenIds(text.slice(0, ctx.continuedFrom));
  let ids = base;
  if (ctx.continued > 0) {
    ids = new Int32Array(base.length + ctx.continued);
    ids.set(base);
    const words = text.slice(ctx.continuedFrom).split(" ");
    // The continued run is space-led words: "", "w1", "w2", …
    for (let w = 1; w < words.length; w++) ids[base.length + w - 1] = WORD_BASE + VOCAB_INDEX.get(` ${words[w]}`)!;
  }
  return { count: ids.length, ids, blockHashes: blockHashChain(ids, blockSize, root), state: ctx.state, continued: ctx.continued, baseState: ctx.baseState };
}

/** Tokens, full-block hash chain and model state of a prompt given as token ids. */
export function idsPrompt(ids: readonly number[], blockSize: number, seed?: number, root = 0n): PromptTokens {
  const own = Int32Array.from(ids);
  const state = extendState(seedState(seed), ids.join(","));
  return { count: own.length, ids: own, blockHashes: blockHashChain(own, blockSize, root), state, continued: 0, baseState: state };
}
