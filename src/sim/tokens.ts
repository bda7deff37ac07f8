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
 *   left open: see ChatEnding), and the rendered text is tokenized. An
 *   earlier assistant message that starts with the model's own answer there
 *   (whole words, each what it predicts after the text before it) has those
 *   words tokenized as they were generated, one token a word, and the text
 *   after them is cut into tokens afresh. So a chat's next turn carries
 *   the previous turn's prompt and answer as the very ids that turn
 *   computed, as a real tokenizer gives back the ids it generated, and hits
 *   their cached blocks.
 * - There are no special tokens (no BOS): `add_special_tokens` changes
 *   nothing.
 *
 * Block hashes chain over token ids as vLLM's do (hash_block_tokens):
 * block j's hash is wyhash of its ids seeded with block j-1's hash, and
 * block 0's with the engine's root hash — random per process unless
 * PYTHONHASHSEED is set, as vLLM's NONE_HASH. So two sim processes give
 * the same text the same ids and different block hashes, as two vLLM
 * processes do: a consumer of their events must key blocks by tokens.
 * vLLM's extra keys (generate_block_hash_extra_keys) join the seed: the
 * LoRA adapter's name on every block, and cache_salt on the first block
 * only, which through the chain keys every block after it.
 */
import { extendState, ownWords, readContext, seedState, VOCAB, VOCAB_INDEX } from "./text-model.ts";

export const CHARS_PER_TOKEN = 4;

/** Ids below this pack up to four ASCII characters, 7 bits each. */
const HASHED_BASE = 2 ** 28;
/** Ids from here are the model's own words (continued output). */
export const WORD_BASE = 2 ** 29;
/** One past the largest token id the sim produces. */
export const VOCAB_END = WORD_BASE + VOCAB.length;
const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** What a block's hash is keyed by besides its tokens and its parent (vLLM's NONE_HASH and extra keys). */
interface BlockHashKeys {
  /** The chain's root (NONE_HASH). */
  readonly root: bigint;
  /** The LoRA adapter's name: an extra key of every block. */
  readonly lora?: string;
  /** The request's cache_salt: an extra key of the first block. */
  readonly salt?: string;
}

/** A prompt as the engine sees it: its tokens, its full-block hash chain (for the prefix cache) and the model state after it. */
export interface PromptTokens {
  count: number;
  /** The prompt's token ids (what /tokenize answers, and what BlockStored events carry); empty where only the count matters (the calibration bench, with no block hashes). */
  ids: Int32Array;
  /** Chained hashes of the prompt's full KV blocks, in order (block j's hash covers blocks 0..j). */
  blockHashes: bigint[];
  /** How the chain is keyed; absent where the prompt has no ids (then no block of it, prompt or generated, is hashed). */
  hashKeys?: BlockHashKeys;
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

type ChatMessage = { role: string; content: string };

/** Chat template stand-in: role markers around each message, then the ending. */
export function renderChat(messages: readonly ChatMessage[], ending: ChatEnding = "generation-prompt"): string {
  return renderChatSpans(messages, ending).text;
}

/** The rendered chat and where each closed assistant message's content lies in it ([from, to) pairs). */
function renderChatSpans(messages: readonly ChatMessage[], ending: ChatEnding): { text: string; answers: number[] } {
  let out = "";
  const answers: number[] = [];
  const last = messages.length - 1;
  for (let i = 0; i <= last; i++) {
    const m = messages[i]!;
    const open = ending === "continue-final" && i === last;
    out += `<|${m.role}|>\n`;
    if (m.role === "assistant" && !open && m.content !== "") answers.push(out.length, out.length + m.content.length);
    out += open ? m.content : `${m.content}\n`;
  }
  return { text: ending === "generation-prompt" ? out + "<|assistant|>\n" : out, answers };
}

/** Tokens, full-block hash chain and model state of a chat: its template rendered, the model's own earlier answers kept as their generated ids. */
export function chatPrompt(
  messages: readonly ChatMessage[],
  ending: ChatEnding,
  blockSize: number,
  seed?: number,
  keys: BlockHashKeys | bigint = 0n,
): PromptTokens {
  const { text, answers } = renderChatSpans(messages, ending);
  const own: OwnSpan[] = [];
  let state = seedState(seed);
  let folded = 0;
  for (let k = 0; k < answers.length; k += 2) {
    const from = answers[k]!;
    const to = answers[k + 1]!;
    state = extendState(state, text, folded, from);
    folded = from;
    const run = ownWords(state, text, from, to);
    if (run.words.length > 0) own.push({ from, to: run.end, ids: run.words.map((w) => WORD_BASE + w) });
  }
  return textPrompt(text, blockSize, seed, keys, own);
}

/** A stretch of text that is the model's own answer, with the ids it was generated as. */
interface OwnSpan {
  from: number;
  to: number;
  ids: number[];
}

/** Ids of text[0, end): 4-character tokens, except the model's own answers, which keep their generated ids; the chunking restarts after each. */
function segmentIds(text: string, end: number, own: readonly OwnSpan[]): Int32Array {
  if (own.length === 0) return textTokenIds(text.slice(0, end));
  const parts: ArrayLike<number>[] = [];
  let at = 0;
  for (const span of own) {
    if (span.to > end) break;
    parts.push(textTokenIds(text.slice(at, span.from)), span.ids);
    at = span.to;
  }
  parts.push(textTokenIds(text.slice(at, end)));
  let n = 0;
  for (const p of parts) n += p.length;
  const ids = new Int32Array(n);
  let k = 0;
  for (const p of parts) {
    ids.set(p, k);
    k += p.length;
  }
  return ids;
}

/** The root of a block-hash chain: vLLM's NONE_HASH, random per process unless PYTHONHASHSEED fixes it. */
export function blockHashRoot(pythonHashSeed: string | undefined): bigint {
  if (pythonHashSeed !== undefined && pythonHashSeed !== "") return Bun.hash.wyhash(`PYTHONHASHSEED:${pythonHashSeed}`);
  return crypto.getRandomValues(new BigUint64Array(1))[0]!;
}

/** The seed of block j's hash: its parent's hash, with vLLM's extra keys for that block mixed in when there are any. */
function blockSeed(parent: bigint, j: number, keys: BlockHashKeys): bigint {
  const salt = j === 0 ? keys.salt : undefined;
  if (keys.lora === undefined && salt === undefined) return parent;
  return Bun.hash.wyhash(`lora:${keys.lora ?? ""}\u0000salt:${salt ?? ""}`, parent);
}

const asKeys = (keys: BlockHashKeys | bigint): BlockHashKeys => (typeof keys === "bigint" ? { root: keys } : keys);

/**
 * Extend `hashes` (the chain of `ids`' first hashes.length full blocks) to
 * cover `upTo` full blocks of `ids`: block j's hash is wyhash of its ids
 * seeded with block j-1's (block 0's with the root), extra keys mixed in.
 */
export function extendBlockHashes(hashes: bigint[], ids: Int32Array, upTo: number, blockSize: number, keys: BlockHashKeys): void {
  const bytes = new Uint8Array(ids.buffer, ids.byteOffset, ids.byteLength);
  for (let j = hashes.length; j < upTo; j++) {
    const parent = j > 0 ? hashes[j - 1]! : keys.root;
    hashes.push(Bun.hash.wyhash(bytes.subarray(j * blockSize * 4, (j + 1) * blockSize * 4), blockSeed(parent, j, keys)));
  }
}

/** Chained hashes of the full blocks of `ids` (block j's hash seeded with block j-1's; block 0's with the root). */
export function blockHashChain(ids: Int32Array, blockSize: number, keys: BlockHashKeys | bigint): bigint[] {
  const out: bigint[] = [];
  extendBlockHashes(out, ids, Math.floor(ids.length / blockSize), blockSize, asKeys(keys));
  return out;
}

/** The same prompt with its block chain keyed anew (a LoRA adapter's name, as vLLM keys every block of a request with one). */
export function rekeyPrompt(prompt: PromptTokens, blockSize: number, keys: Omit<BlockHashKeys, "root">): PromptTokens {
  if (prompt.hashKeys === undefined) return prompt;
  const hashKeys = { ...prompt.hashKeys, ...keys };
  return { ...prompt, hashKeys, blockHashes: blockHashChain(prompt.ids, blockSize, hashKeys) };
}

/** Tokens, full-block hash chain and model state of a text prompt (`own`: stretches tokenized as the model generated them, see chatPrompt). */
export function textPrompt(text: string, blockSize: number, seed?: number, keys: BlockHashKeys | bigint = 0n, own: readonly OwnSpan[] = []): PromptTokens {
  const ctx = readContext(text, seed);
  // The continued words are not re-split into 4-character tokens: they were generated one word per token.
  const base = segmentIds(text, ctx.continuedFrom, own);
  let ids = base;
  if (ctx.continued > 0) {
    ids = new Int32Array(base.length + ctx.continued);
    ids.set(base);
    const words = text.slice(ctx.continuedFrom).split(" ");
    // The continued run is space-led words: "", "w1", "w2", …
    for (let w = 1; w < words.length; w++) ids[base.length + w - 1] = WORD_BASE + VOCAB_INDEX.get(` ${words[w]}`)!;
  }
  const hashKeys = asKeys(keys);
  return {
    count: ids.length,
    ids,
    blockHashes: blockHashChain(ids, blockSize, hashKeys),
    hashKeys,
    state: ctx.state,
    continued: ctx.continued,
    baseState: ctx.baseState,
  };
}

/** Tokens, full-block hash chain and model state of a prompt given as token ids. */
export function idsPrompt(ids: readonly number[], blockSize: number, seed?: number, keys: BlockHashKeys | bigint = 0n): PromptTokens {
  const own = Int32Array.from(ids);
  const state = extendState(seedState(seed), ids.join(","));
  const hashKeys = asKeys(keys);
  return { count: own.length, ids: own, blockHashes: blockHashChain(own, blockSize, hashKeys), hashKeys, state, continued: 0, baseState: state };
}
