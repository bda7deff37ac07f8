/**
 * Byte-level reads of one OpenAI stream chunk (`data: {json}`) without
 * decoding or parsing it: where a key's value starts, where a JSON string
 * ends, a small integer. Pure; every search is the runtime's native one
 * (the generic byte helpers are in src/shared/bytes.ts).
 *
 * Why a key pattern such as `"content"` cannot match inside a string value:
 * a JSON string holds `"` only escaped (`\"`), so the pattern's closing quote
 * would be preceded by a backslash, not by the key's last letter. A match
 * followed by `:` is therefore a key (a value is followed by `,` `}` or `]`).
 */

import { BACKSLASH, bytesAt, COLON, nativeIndexOf, QUOTE, SPACE, skipBlanks } from "../../shared/bytes.ts";

const enc = new TextEncoder();

/** The bytes of a JSON key pattern, quotes included: keyBytes("content") is `"content"`. */
export function keyBytes(name: string): Uint8Array {
  return enc.encode(JSON.stringify(name));
}

/** Index where the key's first occurrence at or after `from` is, or -1. */
export function keyAt(buf: Uint8Array, key: Uint8Array, from: number): number {
  for (let i = nativeIndexOf.call(buf, key, from); i >= 0; i = nativeIndexOf.call(buf, key, i + 1)) {
    if (buf[skipBlanks(buf, i + key.length)] === COLON) return i;
  }
  return -1;
}

/** Index of the first byte of the value of `key` (its first occurrence at or after `from`), or -1. */
export function valueAt(buf: Uint8Array, key: Uint8Array, from: number): number {
  const at = keyAt(buf, key, from);
  return at < 0 ? -1 : skipBlanks(buf, skipBlanks(buf, at + key.length) + 1);
}

/** Index of the quote closing the JSON string whose body starts at `from` (just after its opening quote), or -1. */
export function stringEnd(buf: Uint8Array, from: number): number {
  for (let i = nativeIndexOf.call(buf, QUOTE, from); i >= 0; i = nativeIndexOf.call(buf, QUOTE, i + 1)) {
    let backslashes = 0;
    while (buf[i - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return i;
  }
  return -1;
}

/** Whether the value starting at `i` is JSON null. */
export function isNull(buf: Uint8Array, i: number): boolean {
  return buf[i] === 110 /* n */ && buf[i + 1] === 117 && buf[i + 2] === 108 && buf[i + 3] === 108;
}

/** The non-negative integer starting at `i`, or undefined when none is there. */
export function readUint(buf: Uint8Array, i: number): number | undefined {
  let n = 0;
  let j = i;
  while (j < buf.length && buf[j]! >= 48 && buf[j]! <= 57) n = n * 10 + (buf[j++]! - 48);
  return j > i ? n : undefined;
}

/** Whether buf starts with prefix. */
export function startsWithBytes(buf: Uint8Array, prefix: Uint8Array): boolean {
  return bytesAt(buf, 0, prefix);
}

/** Index just after `data:` and its optional space (SSE allows both), or -1 when the event is not a data line. */
export function dataPayloadAt(buf: Uint8Array): number {
  if (buf[0] !== 100 || buf[1] !== 97 || buf[2] !== 116 || buf[3] !== 97 || buf[4] !== COLON) return -1;
  return buf[5] === SPACE ? 6 : 5;
}
