/**
 * The sim-engine's stand-in for a tokenizer, and its deterministic output
 * text. Rule: a text prompt is ceil(chars / 4) tokens (4 characters per
 * token, roughly what BPE tokenizers give for English); chat messages are
 * rendered first as `<|role|>\ncontent\n` per message plus `<|assistant|>\n`,
 * the generation prompt. A prompt of token ids counts one token per id.
 */

export const CHARS_PER_TOKEN = 4;

/** A prompt as the engine sees it: its length and its full-block hash chain (for the prefix cache). */
export interface PromptTokens {
  count: number;
  /** Chained hashes of the prompt's full KV blocks, in order (block j's hash covers blocks 0..j). */
  blockHashes: string[];
  /** Seeds the deterministic output text. */
  seed: number;
}

export function countTextTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

/** Chat template stand-in: role markers around each message, then the generation prompt. */
export function renderChat(messages: readonly { role: string; content: string }[]): string {
  let out = "";
  for (const m of messages) out += `<|${m.role}|>\n${m.content}\n`;
  return out + "<|assistant|>\n";
}

function chainHash(prev: string, content: string): string {
  return Bun.hash(`${prev}\u0000${content}`).toString(36);
}

/** Tokens and full-block hash chain of a text prompt. */
export function textPrompt(text: string, blockSize: number): PromptTokens {
  const count = countTextTokens(text);
  const blockChars = blockSize * CHARS_PER_TOKEN;
  const full = Math.floor(count / blockSize);
  const blockHashes: string[] = [];
  let prev = "";
  for (let j = 0; j < full; j++) {
    prev = chainHash(prev, text.slice(j * blockChars, (j + 1) * blockChars));
    blockHashes.push(prev);
  }
  return { count, blockHashes, seed: Number(BigInt.asUintN(32, BigInt(Bun.hash(text)))) };
}

/** Tokens and full-block hash chain of a prompt given as token ids. */
export function idsPrompt(ids: readonly number[], blockSize: number): PromptTokens {
  const full = Math.floor(ids.length / blockSize);
  const blockHashes: string[] = [];
  let prev = "";
  for (let j = 0; j < full; j++) {
    prev = chainHash(prev, ids.slice(j * blockSize, (j + 1) * blockSize).join(","));
    blockHashes.push(prev);
  }
  return { count: ids.length, blockHashes, seed: Number(BigInt.asUintN(32, BigInt(Bun.hash(ids.join(","))))) };
}

/**
 * The output vocabulary: plain words with a leading space, JSON-safe as they
 * are, so a chunk can be assembled from pre-encoded bytes without escaping.
 */
export const VOCAB: readonly string[] = (
  "the of and to in is was for on that with as by at from his her it an were are which this be or has had " +
  "not but one their also its they first new after who two been other when time there all into can more " +
  "only most over may some would such these city than made during she three between through under world year"
)
  .split(" ")
  .map((w) => ` ${w}`);

/** Token `index` of an output seeded by `seed`. */
export function tokenIndex(seed: number, index: number): number {
  return (seed + index * 7) % VOCAB.length;
}

export function tokenText(seed: number, index: number): string {
  return VOCAB[tokenIndex(seed, index)]!;
}

/** The whole output text of `n` tokens. */
export function outputText(seed: number, n: number): string {
  let s = "";
  for (let i = 0; i < n; i++) s += tokenText(seed, i);
  return s;
}
