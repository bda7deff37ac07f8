/**
 * What one answer has delivered to its client so far — the text, the token
 * count, whether a finish_reason went out, and whether what went out can be
 * continued exactly — read from each stream chunk as bytes, on the hot path.
 * The text is kept as the raw bytes of the chunks' JSON strings (escapes
 * intact), appended into one growing buffer, and decoded only when a
 * continuation is built.
 */
import type { Route } from "../../metrics/names.ts";
import { bytesAt, lastNonBlank, skipBlanks } from "../../shared/bytes.ts";
import { isNull, keyAt, keyBytes, readUint, stringEnd, valueAt } from "./chunk-bytes.ts";

const CHOICES = keyBytes("choices");
const CONTENT = keyBytes("content");
const TEXT = keyBytes("text");
const FINISH_REASON = keyBytes("finish_reason");
const USAGE = keyBytes("usage");
const COMPLETION_TOKENS = keyBytes("completion_tokens");
/** Deltas a continuation cannot carry in its prefill (vLLM's tool calls and reasoning parsers, SGLang's names). */
const OTHER_DELTAS: readonly [Uint8Array, InexactReason][] = [
  [keyBytes("tool_calls"), "tool_calls"],
  [keyBytes("function_call"), "tool_calls"],
  [keyBytes("reasoning_content"), "reasoning"],
  [keyBytes("reasoning"), "reasoning"],
];

/** Why delivered output cannot be continued exactly. */
export type InexactReason = "tool_calls" | "reasoning" | "unreadable_chunk";

/** The text buffer is made at the first text (many answers are short; some carry none), then doubles. */
const INITIAL_BYTES = 64;
const NO_BYTES = new Uint8Array(0);
const SMALL_COPY = 32;
const decoder = new TextDecoder();

export class Delivery {
  /** Tokens delivered (counted one per chunk with text, or from the engine's running usage when it sends one). */
  tokens: number;
  /** A finish_reason went to the client: the answer is complete, there is nothing to continue. */
  finished = false;
  /** Set once something went out that a continuation cannot reproduce exactly. */
  inexact: InexactReason | undefined;
  private readonly textKey: Uint8Array;
  private readonly chat: boolean;
  /** JSON string bodies of the delivered text, concatenated (a valid JSON string body itself). */
  private buf = NO_BYTES;
  private len = 0;
  private choicesKeyAt = -1;

  /** `before`: what earlier segments of the same answer delivered (a continuation's Delivery goes on from its predecessor's). */
  constructor(
    route: Route,
    private readonly before: { text: string; tokens: number } = { text: "", tokens: 0 },
  ) {
    this.chat = route === "chat";
    this.textKey = this.chat ? CONTENT : TEXT;
    this.tokens = before.tokens;
  }

  /**
   * Read one data event that went to the client (its bytes, `data: {…}`);
   * true when it carried text. An event that is not a chunk this can read
   * makes the delivery inexact rather than guessed.
   */
  observe(event: Uint8Array): boolean {
    const choices = this.choicesValue(event);
    if (choices < 0) {
      this.inexact ??= "unreadable_chunk";
      return false;
    }
    let after = choices;
    let hasText = false;
    const key = keyAt(event, this.textKey, choices);
    const v = key < 0 ? -1 : skipBlanks(event, skipBlanks(event, key + this.textKey.length) + 1);
    let onlyText = false;
    if (v >= 0 && event[v] === 34 /* " */) {
      const end = stringEnd(event, v + 1);
      if (end < 0) {
        this.inexact ??= "unreadable_chunk";
        return false;
      }
      hasText = end > v + 1;
      if (hasText) this.append(event, v + 1, end);
      after = end + 1;
      // vLLM's delta is {"content":"…"} alone: then no other delta can be in it.
      onlyText = event[lastNonBlank(event, key - 1)] === 123 /* { */ && event[skipBlanks(event, after)] === 125; /* } */
    }
    const finish = valueAt(event, FINISH_REASON, after);
    if (finish >= 0 && !isNull(event, finish)) this.finished = true;
    if (this.chat && !onlyText) this.checkOtherDeltas(event, choices);
    const usage = valueAt(event, USAGE, finish >= 0 ? finish : after);
    const running = usage >= 0 && event[usage] === 123 /* { */ ? this.runningUsage(event, usage) : undefined;
    // vLLM's stream_options.continuous_usage_stats: the engine's own count beats counting chunks.
    if (running !== undefined) this.tokens = this.before.tokens + running;
    else if (hasText) this.tokens++;
    return hasText;
  }

  /** The whole delivered text (earlier segments included), or undefined when the bytes do not decode as JSON string content. */
  text(): string | undefined {
    if (this.len === 0) return this.before.text;
    try {
      return this.before.text + (JSON.parse(`"${decoder.decode(this.buf.subarray(0, this.len))}"`) as string);
    } catch {
      return undefined;
    }
  }

  /** The engine's usage chunk told the real count of this segment: trust it over the chunk count. */
  settleTokens(segmentCompletionTokens: number): void {
    this.tokens = this.before.tokens + segmentCompletionTokens;
  }

  /** Tokens delivered by earlier segments. */
  get tokensBefore(): number {
    return this.before.tokens;
  }

  /**
   * Where the choices array starts. Every chunk of one stream has the same
   * envelope before it, so the offset found in the first is checked first.
   */
  private choicesValue(event: Uint8Array): number {
    const at = this.choicesKeyAt;
    if (at >= 0 && bytesAt(event, at, CHOICES) && event[at + CHOICES.length] === 58 /* : */) return skipBlanks(event, at + CHOICES.length + 1);
    const key = keyAt(event, CHOICES, 0);
    if (key < 0) return -1;
    this.choicesKeyAt = key;
    return skipBlanks(event, skipBlanks(event, key + CHOICES.length) + 1);
  }

  private append(src: Uint8Array, from: number, to: number): void {
    const n = to - from;
    if (this.len + n > this.buf.length) {
      const grown = new Uint8Array(Math.max(INITIAL_BYTES, this.buf.length * 2, this.len + n));
      grown.set(this.buf.subarray(0, this.len));
      this.buf = grown;
    }
    // A token's text is a few bytes: a loop beats making a subarray view to set() from.
    if (n <= SMALL_COPY) for (let i = 0; i < n; i++) this.buf[this.len + i] = src[from + i]!;
    else this.buf.set(src.subarray(from, to), this.len);
    this.len += n;
  }

  private checkOtherDeltas(event: Uint8Array, from: number): void {
    if (this.inexact) return;
    for (const [key, reason] of OTHER_DELTAS) {
      const v = valueAt(event, key, from);
      // null (SGLang sends "tool_calls":null on every chunk), "" and [] carry nothing.
      if (v < 0 || isNull(event, v) || (event[v] === 34 && event[v + 1] === 34) || (event[v] === 91 && event[v + 1] === 93)) continue;
      this.inexact = reason;
      return;
    }
  }

  private runningUsage(event: Uint8Array, usageAt: number): number | undefined {
    const v = valueAt(event, COMPLETION_TOKENS, usageAt);
    return v < 0 ? undefined : readUint(event, v);
  }
}
