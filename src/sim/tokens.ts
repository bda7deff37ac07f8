/**
 * The sim-engine's stand-in for a tokenizer and chat template. Rule: a text
 * prompt is ceil(chars / 4) tokens (4 characters per token, roughly what BPE
 * tokenizers give for English), except that words the model itself generated
 * at the end of the context (a continuation's prefill) count one token each,
 * as they were generated; chat messages are rendered as
 * `<|role|>\ncontent\n` per message plus `<|assistant|>\n`, the generation
 * prompt. A prompt of token ids counts one token per id.
 */
import { readContext, extendState, seedState } from "./text-model.ts";

export const CHARS_PER_TOKEN = 4;

/** A prompt as the engine sees it: its length, its full-block hash chain (for the prefix cache) and the model state after it. */
export interface PromptTokens {
  count: number;
  /** Chained hashes of the prompt's full KV blocks, in order (block j's hash covers blocks 0..j). */
  blockHashes: string[];
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

function chainHash(prev: string, content: string): string {
  return Bun.hash(`${prev}\u0000${content}`).toString(36);
}

/** Tokens, full-block hash chain and model state of a text prompt. */
export function textPrompt(text: string, blockSize: number, seed?: number): PromptTokens {
  const ctx = readContext(text, seed);
  // The continued words are not re-split into 4-character tokens: they were generated one word per token.
  const base = text.slice(0, ctx.continuedFrom);
  const baseCount = countTextTokens(base);
  const blockChars = blockSize * CHARS_PER_TOKEN;
  const full = Math.floor(baseCount / blockSize);
  const blockHashes: string[] = [];
  let prev = "";
  for (let j = 0; j < full; j++) {
    prev = chainHash(prev, base.slice(j * blockChars, (j + 1) * blockChars));
    blockHashes.push(prev);
  }
  return { count: baseCount + ctx.continued, blockHashes, state: ctx.state, continued: ctx.continued, baseState: ctx.baseState };
}

/** Tokens, full-block hash chain and model state of a prompt given as token ids. */
export function idsPrompt(ids: readonly number[], blockSize: number, seed?: number): PromptTokens {
  const full = Math.floor(ids.length / blockSize);
  const blockHashes: string[] = [];
  let prev = "";
  for (let j = 0; j < full; j++) {
    prev = chainHash(prev, ids.slice(j * blockSize, (j + 1) * blockSize).join(","));
    blockHashes.push(prev);
  }
  const state = extendState(seedState(seed), ids.join(","));
  return { count: ids.length, blockHashes, state, continued: 0, baseState: state };
}
