/**
 * Byte-level helpers shared by the readers that look into upstream bytes
 * without decoding them (the SSE scanner, the continuation's chunk reader).
 * Pure; every search is the runtime's native one.
 */

const TAB = 9;
export const LF = 10;
export const CR = 13;
export const SPACE = 32;
export const QUOTE = 34;
export const COLON = 58;
export const BACKSLASH = 92;

/** Native byte search over a Uint8Array (Buffer's indexOf accepts any Uint8Array as `this`). */
export const nativeIndexOf = Buffer.prototype.indexOf as (this: Uint8Array, needle: Uint8Array | number, from: number) => number;

function isBlank(b: number | undefined): boolean {
  return b === SPACE || b === TAB || b === LF || b === CR;
}

/** Index of the first non-blank byte at or after `i`, or `end` when there is none before it. */
export function skipBlanks(buf: Uint8Array, i: number, end: number = buf.length): number {
  let j = i;
  while (j < end && isBlank(buf[j])) j++;
  return j;
}

/** Index of the last non-blank byte at or before `i` (-1 when none). */
export function lastNonBlank(buf: Uint8Array, i: number): number {
  let j = i;
  while (j >= 0 && isBlank(buf[j])) j--;
  return j;
}

/** Whether `bytes` sit in buf at `at` (and before `end`). */
export function bytesAt(buf: Uint8Array, at: number, bytes: Uint8Array, end: number = buf.length): boolean {
  if (at + bytes.length > end) return false;
  for (let i = 0; i < bytes.length; i++) if (buf[at + i] !== bytes[i]) return false;
  return true;
}
