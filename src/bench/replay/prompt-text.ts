/**
 * Prompt text for replayed requests, made of segments: `tokens` tokens of
 * the text named `key`. The text of a key is a fixed stream of pseudo-words
 * seeded by the key, so the same key gives byte-identical text in every
 * request (and every run), a shorter use of it is a prefix of a longer one
 * (a trace's partial last block), and another key gives other text.
 *
 * Lengths follow the sim-engine's tokenizer stand-in: a text prompt is
 * ⌈chars / CHARS_PER_TOKEN⌉ tokens (src/sim/tokens.ts), so a segment of n
 * tokens is n × CHARS_PER_TOKEN characters and a prompt of whole segments
 * has exactly their total. A Mooncake block of 512 tokens is then 2,048
 * characters, which the sim's 16-token KV blocks divide evenly, so the
 * engine's prefix cache sees the trace's block sharing and nothing more.
 */
import { sfc32 } from "../../shared/sfc32.ts";
import { CHARS_PER_TOKEN } from "../../sim/tokens.ts";
import { MOONCAKE_BLOCK_TOKENS, type TraceRequest } from "./trace.ts";

export interface PromptSegment {
  /** Names the text: the same key, the same characters. */
  key: string;
  tokens: number;
}

/**
 * Every word starts with a letter that no word of the sim's output
 * vocabulary starts with (src/sim/text-model.ts), so no tail of a prompt —
 * not even a word cut short at a segment's end — reads as text the model
 * generated itself (which the sim counts one token a word).
 */
const FIRST = "gjklpqrvxz";
const CONSONANTS = "bcdfghjklmnprstvz";
const VOWELS = "aeiou";
const WORD_COUNT = 1024;

const WORDS: readonly string[] = (() => {
  const next = sfc32(0x9e3779b9, 0x243f6a88, 0xb7e15162, 0x6a09e667);
  const words: string[] = [];
  while (words.length < WORD_COUNT) {
    let w = FIRST[next() % FIRST.length]! + VOWELS[next() % VOWELS.length]!;
    const syllables = 1 + (next() % 3);
    for (let s = 0; s < syllables; s++) w += CONSONANTS[next() % CONSONANTS.length]! + VOWELS[next() % VOWELS.length]!;
    words.push(` ${w}`);
  }
  return words;
})();

/** The first `chars` characters of the text named `key`. */
export function keyText(key: string, chars: number): string {
  const h = Bun.hash(key);
  const lo = Number(BigInt.asUintN(32, h));
  const hi = Number(BigInt.asUintN(32, h >> 32n));
  const next = sfc32(lo, hi, key.length, 0x5bd1e995);
  for (let i = 0; i < 8; i++) next(); // let the seed mix in
  const parts: string[] = [];
  let length = 0;
  while (length < chars) {
    const w = WORDS[next() & (WORD_COUNT - 1)]!;
    parts.push(w);
    length += w.length;
  }
  return parts.join("").slice(0, chars);
}

/**
 * Builds prompt text from segments, keeping the texts of recently used keys
 * (a shared Mooncake block is generated once, not once per request), within
 * a bound on the characters kept.
 */
export class PromptTextCache {
  private readonly texts = new Map<string, string>();
  private chars = 0;

  constructor(private readonly maxChars = 64 * 1024 * 1024) {}

  segment(key: string, tokens: number): string {
    const chars = tokens * CHARS_PER_TOKEN;
    const known = this.texts.get(key);
    if (known !== undefined && known.length >= chars) {
      this.texts.delete(key); // most recently used goes last
      this.texts.set(key, known);
      return known.length === chars ? known : known.slice(0, chars);
    }
    const text = keyText(key, chars);
    if (known !== undefined) {
      this.texts.delete(key);
      this.chars -= known.length;
    }
    this.texts.set(key, text);
    this.chars += text.length;
    for (const [k, v] of this.texts) {
      if (this.chars <= this.maxChars) break;
      this.texts.delete(k);
      this.chars -= v.length;
    }
    return text;
  }

  prompt(segments: readonly PromptSegment[]): string {
    let out = "";
    for (const s of segments) out += this.segment(s.key, s.tokens);
    return out;
  }
}

/** Tokens a prompt of these segments has (for the sim's tokenizer stand-in). */
export function segmentTokens(segments: readonly PromptSegment[]): number {
  let n = 0;
  for (const s of segments) n += s.tokens;
  return n;
}

/**
 * A trace request's prompt: block by block from its Mooncake hash_ids (512
 * tokens each, the last one what remains of input_length), or, for a trace
 * without them, one segment of its own (`index` names it, so a request keeps
 * its prompt from run to run and no other request shares it).
 */
export function traceSegments(r: TraceRequest, index: number): PromptSegment[] {
  if (r.blockIds === undefined) return [{ key: `request-${index}`, tokens: r.inputTokens }];
  const n = r.blockIds.length;
  return r.blockIds.map((id, j) => ({ key: `block-${id}`, tokens: j < n - 1 ? MOONCAKE_BLOCK_TOKENS : r.inputTokens - MOONCAKE_BLOCK_TOKENS * (n - 1) }));
}
