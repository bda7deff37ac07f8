/**
 * One pass over an OpenAI request body's prompt that yields what the gateway
 * needs of it: the prompt's size for the token estimate (quota, fair queues)
 * and the leading prompt text for prefix-affinity hashing. The hot path walks
 * a body once, not once per consumer.
 *
 * Prompt text (deterministic, truncated to `maxTextChars`):
 * - chat (`messages`): for each message `<|role|>\n` + content + `\n`, where
 *   content is a string, or an array of parts whose `text` parts are joined
 *   and other parts appear as `[type]` followed by an image/audio URL or data
 *   when it is a string (so two different images do not share a prefix);
 * - completions (`prompt`, when there are no messages): a string; an array of
 *   strings joined with `\n`; token ids (numbers, or arrays of them) as
 *   comma-separated decimals.
 * Size: the characters of message contents (strings and the `text` of parts),
 * of `prompt` and of `input` (strings), and pre-tokenised ids counted one each.
 */

export interface PromptWalk {
  /** Prompt characters (message contents, prompt and input strings). */
  chars: number;
  /** Pre-tokenised ids in prompt or input. */
  tokenIds: number;
  /** The leading prompt text, at most maxTextChars long. */
  text: string;
}

export function walkPrompt(body: unknown, maxTextChars: number): PromptWalk {
  const walk = new Walker(maxTextChars);
  if (typeof body !== "object" || body === null) return walk.result();
  const b = body as Record<string, unknown>;
  if (Array.isArray(b.messages)) walk.messages(b.messages);
  walk.prompt(b.prompt, !Array.isArray(b.messages));
  walk.prompt(b.input, false);
  return walk.result();
}

class Walker {
  private readonly parts: string[] = [];
  private length = 0;
  chars = 0;
  tokenIds = 0;

  constructor(private readonly maxChars: number) {}

  result(): PromptWalk {
    return { chars: this.chars, tokenIds: this.tokenIds, text: this.parts.join("") };
  }

  private add(s: string): void {
    if (this.length >= this.maxChars) return;
    const room = this.maxChars - this.length;
    const piece = s.length > room ? s.slice(0, room) : s;
    this.parts.push(piece);
    this.length += piece.length;
  }

  messages(messages: readonly unknown[]): void {
    for (const m of messages) {
      if (typeof m !== "object" || m === null) continue;
      const msg = m as Record<string, unknown>;
      this.add(`<|${typeof msg.role === "string" ? msg.role : ""}|>\n`);
      const content = msg.content;
      if (typeof content === "string") {
        this.chars += content.length;
        this.add(content);
      } else if (Array.isArray(content)) {
        for (const p of content) this.part(p);
      }
      this.add("\n");
    }
  }

  private part(p: unknown): void {
    if (typeof p !== "object" || p === null) return;
    const part = p as Record<string, unknown>;
    if (typeof part.text === "string") this.chars += part.text.length;
    if (part.type === "text" && typeof part.text === "string") return this.add(part.text);
    const type = typeof part.type === "string" ? part.type : "part";
    this.add(`[${type}]`);
    // image_url: {url}, input_audio: {data}; the data may be a huge base64
    // string, but add() copies only the room left.
    const inner = part[type];
    if (typeof inner === "object" && inner !== null) {
      const v = inner as Record<string, unknown>;
      if (typeof v.url === "string") this.add(v.url);
      else if (typeof v.data === "string") this.add(v.data);
    }
  }

  /** A `prompt` or `input`: counted always, added to the text when `asText`. */
  prompt(p: unknown, asText: boolean): void {
    if (typeof p === "string") {
      this.chars += p.length;
      if (asText) this.add(p);
      return;
    }
    if (!Array.isArray(p)) return;
    for (let i = 0; i < p.length; i++) {
      const item: unknown = p[i];
      if (asText && i > 0) this.add(typeof item === "number" ? "," : "\n");
      if (typeof item === "string") {
        this.chars += item.length;
        if (asText) this.add(item);
      } else if (typeof item === "number") {
        this.tokenIds += 1;
        if (asText) this.add(String(item));
      } else if (Array.isArray(item)) {
        this.tokenIds += item.length;
        if (asText) this.tokens(item);
      }
    }
  }

  private tokens(tokens: readonly unknown[]): void {
    for (let i = 0; i < tokens.length && this.length < this.maxChars; i++) {
      const t: unknown = tokens[i];
      if (typeof t === "number") this.add(i > 0 ? `,${t}` : String(t));
    }
  }
}
