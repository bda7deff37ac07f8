/**
 * Prompt-prefix hashing for affinity: the prompt text of an OpenAI request
 * and chained hashes of its leading full blocks. Runs on the gateway's main
 * thread for every request, so it reads at most maxBlocks × blockChars
 * characters of the prompt, however long it is.
 */

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
 */
export function prefixHashes(text: string, blockChars: number, maxBlocks: number): number[] {
  if (!(blockChars >= 1) || !(maxBlocks >= 1)) return [];
  const blocks = Math.min(Math.floor(maxBlocks), Math.floor(text.length / blockChars));
  const out = new Array<number>(blocks);
  let seed = CHAIN_SEED;
  for (let i = 0; i < blocks; i++) {
    seed = Bun.hash.wyhash(text.slice(i * blockChars, (i + 1) * blockChars), seed);
    out[i] = Number(seed & MASK_53);
  }
  return out;
}

/**
 * The prompt text of an OpenAI request body, deterministically, truncated
 * to `maxChars`:
 * - chat (`messages`): for each message `<|role|>\n` + content + `\n`, where
 *   content is a string, or an array of parts whose `text` parts are joined
 *   and other parts appear as `[type]` followed by an image/audio URL or
 *   data when it is a string (so two different images do not share a prefix);
 * - completions (`prompt`): a string; an array of strings joined with `\n`;
 *   token ids (numbers, or arrays of them) as comma-separated decimals.
 * Anything else yields "". Building stops once `maxChars` are collected.
 */
export function promptText(body: unknown, maxChars = Number.POSITIVE_INFINITY): string {
  if (typeof body !== "object" || body === null) return "";
  const b = body as Record<string, unknown>;
  const acc = new TextAccumulator(maxChars);
  if (Array.isArray(b.messages)) appendMessages(acc, b.messages);
  else if (b.prompt !== undefined) appendPrompt(acc, b.prompt);
  return acc.text();
}

/** promptText + prefixHashes with the config's prefix-affinity options; reads only what it hashes. */
export function requestPrefixHashes(body: unknown, opts: { readonly blockChars: number; readonly maxBlocks: number }): number[] {
  return prefixHashes(promptText(body, opts.blockChars * opts.maxBlocks), opts.blockChars, opts.maxBlocks);
}

class TextAccumulator {
  private readonly parts: string[] = [];
  private length = 0;
  constructor(private readonly maxChars: number) {}
  get full(): boolean {
    return this.length >= this.maxChars;
  }
  add(s: string): void {
    if (this.full) return;
    const room = this.maxChars - this.length;
    const piece = s.length > room ? s.slice(0, room) : s;
    this.parts.push(piece);
    this.length += piece.length;
  }
  text(): string {
    return this.parts.join("");
  }
}

function appendMessages(acc: TextAccumulator, messages: readonly unknown[]): void {
  for (const m of messages) {
    if (acc.full) return;
    if (typeof m !== "object" || m === null) continue;
    const msg = m as Record<string, unknown>;
    acc.add(`<|${typeof msg.role === "string" ? msg.role : ""}|>\n`);
    const content = msg.content;
    if (typeof content === "string") acc.add(content);
    else if (Array.isArray(content)) appendParts(acc, content);
    acc.add("\n");
  }
}

function appendParts(acc: TextAccumulator, parts: readonly unknown[]): void {
  for (const p of parts) {
    if (acc.full) return;
    if (typeof p !== "object" || p === null) continue;
    const part = p as Record<string, unknown>;
    if (part.type === "text" && typeof part.text === "string") {
      acc.add(part.text);
      continue;
    }
    const type = typeof part.type === "string" ? part.type : "part";
    acc.add(`[${type}]`);
    // image_url: {url}, input_audio: {data}; the data may be a huge base64
    // string, but the accumulator copies only the room left.
    const inner = part[type];
    if (typeof inner === "object" && inner !== null) {
      const v = inner as Record<string, unknown>;
      if (typeof v.url === "string") acc.add(v.url);
      else if (typeof v.data === "string") acc.add(v.data);
    }
  }
}

function appendPrompt(acc: TextAccumulator, prompt: unknown): void {
  if (typeof prompt === "string") return acc.add(prompt);
  if (!Array.isArray(prompt)) return;
  for (let i = 0; i < prompt.length && !acc.full; i++) {
    const item: unknown = prompt[i];
    if (i > 0) acc.add(typeof item === "number" ? "," : "\n");
    if (typeof item === "string") acc.add(item);
    else if (typeof item === "number") acc.add(String(item));
    else if (Array.isArray(item)) appendTokens(acc, item);
  }
}

function appendTokens(acc: TextAccumulator, tokens: readonly unknown[]): void {
  for (let i = 0; i < tokens.length && !acc.full; i++) {
    const t: unknown = tokens[i];
    if (typeof t === "number") acc.add(i > 0 ? `,${t}` : String(t));
  }
}
