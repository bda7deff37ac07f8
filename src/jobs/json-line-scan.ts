/**
 * A batch input line checked where its bytes lie: strict JSON (RFC 8259,
 * what JSON.parse accepts) and UTF-8 inside strings, nesting bounded without
 * recursion, and the places of the few values the batch checks need —
 * `custom_id`, `method`, `url`, `body`, and in `body` its `model`, `stream`,
 * `messages`, `prompt` and `input`. Nothing is decoded or built, so a 150 MB
 * upload makes no garbage the size of its text (decoding each line and
 * parsing it made three copies of every byte, and the heap grew by hundreds
 * of MiB before a collection).
 *
 * It answers only for the plain case: a line it does not accept — not an
 * object, not valid, too deep, a key written with an escape — returns
 * `false`, and the caller checks the line the slow way (decode, JSON.parse),
 * which then names the fault. So the scan can refuse more than JSON.parse
 * does, never less; the test compares the two on valid and mutated lines.
 */

/** The values the scan locates: their byte offsets in `spans` (start at 2 × id, end at 2 × id + 1; -1 when absent). */
export const LineKey = { CustomId: 0, Method: 1, Url: 2, Body: 3, Model: 4, Stream: 5, Messages: 6, Prompt: 7, Input: 8 } as const;
export type LineKey = (typeof LineKey)[keyof typeof LineKey];
const KEY_COUNT = 9;

const encoder = new TextEncoder();
const TOP_KEYS: readonly [Uint8Array, LineKey][] = [
  [encoder.encode("custom_id"), LineKey.CustomId],
  [encoder.encode("method"), LineKey.Method],
  [encoder.encode("url"), LineKey.Url],
  [encoder.encode("body"), LineKey.Body],
];
const BODY_KEYS: readonly [Uint8Array, LineKey][] = [
  [encoder.encode("model"), LineKey.Model],
  [encoder.encode("stream"), LineKey.Stream],
  [encoder.encode("messages"), LineKey.Messages],
  [encoder.encode("prompt"), LineKey.Prompt],
  [encoder.encode("input"), LineKey.Input],
];

const NONE = -1;
const OBJECT = 1;
const ARRAY = 2;

/** Scans lines, reusing its buffers; `spans` holds the last accepted line's value offsets. */
export class JsonLineScanner {
  readonly spans = new Int32Array(KEY_COUNT * 2);
  readonly #containers: Uint8Array;
  /** Per depth: the key the value being read at that depth belongs to (NONE when not one of ours). */
  readonly #keyAt: Int8Array;
  readonly #startAt: Int32Array;
  #b: Uint8Array = new Uint8Array(0);
  #i = 0;

  constructor(readonly maxDepth: number) {
    this.#containers = new Uint8Array(maxDepth + 2);
    this.#keyAt = new Int8Array(maxDepth + 2);
    this.#startAt = new Int32Array(maxDepth + 2);
  }

  /** Whether `line` is a JSON object this scan vouches for; its values' places are then in `spans`. */
  scan(line: Uint8Array): boolean {
    this.spans.fill(NONE);
    this.#b = line;
    this.#i = 0;
    try {
      return this.#object();
    } finally {
      this.#b = new Uint8Array(0);
    }
  }

  #ws(): void {
    const b = this.#b;
    let i = this.#i;
    while (i < b.length) {
      const c = b[i]!;
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      i++;
    }
    this.#i = i;
  }

  /** The whole line: one object, whitespace around it, nothing else. */
  #object(): boolean {
    const b = this.#b;
    this.#ws();
    if (b[this.#i] !== 0x7b) return false;
    let depth = 0; // containers open
    const containers = this.#containers;
    const keyAt = this.#keyAt;
    const startAt = this.#startAt;
    // Reading a value at `depth + 1`'s slot: `pendingKey` is its key.
    let pendingKey = NONE;
    let valueStart = this.#i;
    for (;;) {
      // A value starts here.
      this.#ws();
      const c = b[this.#i];
      if (c === 0x7b || c === 0x5b) {
        if (depth >= this.maxDepth) return false;
        containers[depth] = c === 0x7b ? OBJECT : ARRAY;
        keyAt[depth] = pendingKey;
        startAt[depth] = this.#i;
        if (pendingKey === LineKey.Body) for (let k = LineKey.Model; k < KEY_COUNT; k++) this.spans[2 * k] = this.spans[2 * k + 1] = NONE;
        depth++;
        this.#i++;
        this.#ws();
        const close = c === 0x7b ? 0x7d : 0x5d;
        if (b[this.#i] === close) {
          this.#i++;
          depth--;
          if (keyAt[depth]! !== NONE) this.#record(keyAt[depth]!, startAt[depth]!);
        } else if (c === 0x7b) {
          const key = this.#key(depth);
          if (key === undefined) return false;
          pendingKey = key;
          continue;
        } else {
          pendingKey = NONE;
          continue;
        }
      } else {
        valueStart = this.#i;
        if (!this.#scalar()) return false;
        if (pendingKey !== NONE) this.#record(pendingKey, valueStart);
      }
      // A value ended: close containers or move to the next member.
      for (;;) {
        if (depth === 0) {
          this.#ws();
          return this.#i === b.length;
        }
        this.#ws();
        const d = b[this.#i];
        const container = containers[depth - 1];
        if (d === 0x2c) {
          this.#i++;
          if (container === OBJECT) {
            this.#ws();
            const key = this.#key(depth);
            if (key === undefined) return false;
            pendingKey = key;
          } else pendingKey = NONE;
          break;
        }
        if ((container === OBJECT && d === 0x7d) || (container === ARRAY && d === 0x5d)) {
          this.#i++;
          depth--;
          if (keyAt[depth]! !== NONE) this.#record(keyAt[depth]!, startAt[depth]!);
          continue;
        }
        return false;
      }
    }
  }

  #record(key: number, start: number): void {
    this.spans[2 * key] = start;
    this.spans[2 * key + 1] = this.#i;
  }

  /**
   * `"key"` then `:`, at `depth` (1 = the line's object): one of ours, NONE,
   * or undefined when malformed or written with an escape (the slow path
   * decides those).
   */
  #key(depth: number): number | undefined {
    const b = this.#b;
    if (b[this.#i] !== 0x22) return undefined;
    const start = this.#i + 1;
    if (!this.#string()) return undefined;
    const end = this.#i - 1;
    for (let j = start; j < end; j++) if (b[j] === 0x5c) return undefined;
    this.#ws();
    if (b[this.#i] !== 0x3a) return undefined;
    this.#i++;
    let table: readonly [Uint8Array, LineKey][] | undefined;
    if (depth === 1) table = TOP_KEYS;
    else if (depth === 2 && this.#keyAt[1] === LineKey.Body && this.#containers[1] === OBJECT) table = BODY_KEYS;
    if (table === undefined) return NONE;
    for (const [name, id] of table) if (sameBytes(b, start, end, name)) return id;
    return NONE;
  }

  /** A string, number or literal at the cursor; the cursor ends after it. */
  #scalar(): boolean {
    const b = this.#b;
    const c = b[this.#i];
    if (c === 0x22) return this.#string();
    if (c === 0x74) return this.#literal(LIT_TRUE);
    if (c === 0x66) return this.#literal(LIT_FALSE);
    if (c === 0x6e) return this.#literal(LIT_NULL);
    return this.#number();
  }

  #literal(word: Uint8Array): boolean {
    const b = this.#b;
    if (this.#i + word.length > b.length) return false;
    for (let k = 0; k < word.length; k++) if (b[this.#i + k] !== word[k]) return false;
    this.#i += word.length;
    return true;
  }

  #number(): boolean {
    const b = this.#b;
    let i = this.#i;
    if (b[i] === 0x2d) i++;
    if (b[i] === 0x30) i++;
    else if (isDigit19(b[i])) while (isDigit(b[i])) i++;
    else return false;
    if (b[i] === 0x2e) {
      i++;
      if (!isDigit(b[i])) return false;
      while (isDigit(b[i])) i++;
    }
    if (b[i] === 0x65 || b[i] === 0x45) {
      i++;
      if (b[i] === 0x2b || b[i] === 0x2d) i++;
      if (!isDigit(b[i])) return false;
      while (isDigit(b[i])) i++;
    }
    this.#i = i;
    return true;
  }

  /** A string from its opening quote: escapes as JSON has them, no control characters, valid UTF-8. */
  #string(): boolean {
    const b = this.#b;
    const n = b.length;
    let i = this.#i + 1;
    while (i < n) {
      const c = b[i]!;
      if (c === 0x22) {
        this.#i = i + 1;
        return true;
      }
      if (c < 0x20) return false;
      if (c === 0x5c) {
        const e = b[i + 1];
        if (e === 0x75) {
          for (let k = 2; k < 6; k++) if (!isHex(b[i + k])) return false;
          i += 6;
        } else if (e === 0x22 || e === 0x5c || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) i += 2;
        else return false;
        continue;
      }
      if (c < 0x80) {
        i++;
        continue;
      }
      const len = utf8SequenceLength(b, i);
      if (len === 0) return false;
      i += len;
    }
    return false;
  }
}

const LIT_TRUE = encoder.encode("true");
const LIT_FALSE = encoder.encode("false");
const LIT_NULL = encoder.encode("null");

function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= 0x30 && c <= 0x39;
}

function isDigit19(c: number | undefined): boolean {
  return c !== undefined && c >= 0x31 && c <= 0x39;
}

function isHex(c: number | undefined): boolean {
  return c !== undefined && ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66));
}

function isCont(c: number | undefined): boolean {
  return c !== undefined && (c & 0xc0) === 0x80;
}

/** The length of the well-formed UTF-8 sequence at `i` (Unicode's table 3-7: no overlongs, no surrogates, nothing past U+10FFFF), or 0. */
function utf8SequenceLength(b: Uint8Array, i: number): number {
  const c = b[i]!;
  const c1 = b[i + 1];
  if (c >= 0xc2 && c <= 0xdf) return isCont(c1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    if (c1 === undefined) return 0;
    const lo = c === 0xe0 ? 0xa0 : 0x80;
    const hi = c === 0xed ? 0x9f : 0xbf;
    return c1 >= lo && c1 <= hi && isCont(b[i + 2]) ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    if (c1 === undefined) return 0;
    const lo = c === 0xf0 ? 0x90 : 0x80;
    const hi = c === 0xf4 ? 0x8f : 0xbf;
    return c1 >= lo && c1 <= hi && isCont(b[i + 2]) && isCont(b[i + 3]) ? 4 : 0;
  }
  return 0;
}

function sameBytes(b: Uint8Array, start: number, end: number, name: Uint8Array): boolean {
  if (end - start !== name.length) return false;
  for (let k = 0; k < name.length; k++) if (b[start + k] !== name[k]) return false;
  return true;
}
