/**
 * An answer's `model` as the client asked for it. When llmgw sent the engine
 * another name than the client's — an alias resolved, a fallback model — the
 * engine's answer names that model; the client reads the name it sent, and
 * the header and the audit line say which models wrote. Works on bytes: the
 * first `"model"` key of an event or a JSON answer (the envelope's: vLLM,
 * SGLang and OpenAI put it before the choices, and a key inside a string
 * would be escaped) has its string value replaced. An event without one
 * passes unchanged.
 */

const KEY = new TextEncoder().encode('"model"');
const enc = new TextEncoder();

function isBlank(b: number | undefined): boolean {
  return b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;
}

/** Index of `"model"` in `bytes` from `from`, or -1. */
function keyAt(bytes: Uint8Array, from: number): number {
  const first = KEY[0]!;
  for (let i = bytes.indexOf(first, from); i >= 0 && i + KEY.length <= bytes.length; i = bytes.indexOf(first, i + 1)) {
    let j = 1;
    while (j < KEY.length && bytes[i + j] === KEY[j]) j++;
    if (j === KEY.length) return i;
  }
  return -1;
}

export class ModelRename {
  /** The client's name as a JSON string, quotes included. */
  private readonly value: Uint8Array;

  constructor(readonly clientModel: string) {
    this.value = enc.encode(JSON.stringify(clientModel));
  }

  /** `bytes` with its first `"model": "…"` value replaced by the client's name (a copy), or `bytes` itself when it has none. */
  apply(bytes: Uint8Array): Uint8Array {
    for (let at = keyAt(bytes, 0); at >= 0; at = keyAt(bytes, at + 1)) {
      let i = at + KEY.length;
      while (isBlank(bytes[i])) i++;
      if (bytes[i] !== 0x3a /* : */) continue;
      i++;
      while (isBlank(bytes[i])) i++;
      if (bytes[i] !== 0x22 /* " */) return bytes;
      let end = i + 1;
      while (end < bytes.length && bytes[end] !== 0x22) end += bytes[end] === 0x5c /* \ */ ? 2 : 1;
      if (end >= bytes.length) return bytes;
      const out = new Uint8Array(bytes.length - (end + 1 - i) + this.value.length);
      out.set(bytes.subarray(0, i), 0);
      out.set(this.value, i);
      out.set(bytes.subarray(end + 1), i + this.value.length);
      return out;
    }
    return bytes;
  }
}
