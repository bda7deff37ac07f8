/**
 * Splits an upstream SSE byte stream into complete events without decoding
 * or re-splitting what was already scanned: each chunk is searched once for
 * blank-line boundaries, and only an incomplete tail is carried to the next
 * chunk. Classifies each event from its leading bytes; JSON is parsed only for
 * the rare events the gateway must read (usage, errors).
 */

export type SseEventKind =
  | "data" // a JSON data event (a token chunk)
  | "usage" // the final usage chunk (choices: [])
  | "error" // an error object sent in-stream
  | "done" // data: [DONE]
  | "comment" // ": keep-alive" and other comments
  | "malformed";

const LF = 10;
const CR = 13;
const enc = new TextEncoder();
const DATA_OBJECT = enc.encode("data: {");
const DATA_OBJECT_NOSPACE = enc.encode("data:{");
// SSE allows "data:" with or without the space (WHATWG HTML, server-sent events).
const DONE = enc.encode("data: [DONE]");
const DONE_NOSPACE = enc.encode("data:[DONE]");
const ERROR_PREFIX = enc.encode('data: {"error"');
const ERROR_PREFIX_NOSPACE = enc.encode('data:{"error"');
const EMPTY_CHOICES = enc.encode('"choices":[]');

function startsWith(buf: Uint8Array, start: number, end: number, prefix: Uint8Array): boolean {
  if (end - start < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (buf[start + i] !== prefix[i]) return false;
  return true;
}

function indexOfBytes(buf: Uint8Array, start: number, end: number, needle: Uint8Array): number {
  const first = needle[0];
  outer: for (let i = start; i <= end - needle.length; i++) {
    if (buf[i] !== first) continue;
    for (let j = 1; j < needle.length; j++) if (buf[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

/** Classify the event occupying buf[start, end) (without its trailing blank line). */
export function classifyEvent(buf: Uint8Array, start: number, end: number): SseEventKind {
  while (end > start && (buf[end - 1] === LF || buf[end - 1] === CR)) end--;
  if (end === start) return "comment";
  if (buf[start] === 58 /* ':' */) return "comment";
  if (startsWith(buf, start, end, DONE) || startsWith(buf, start, end, DONE_NOSPACE)) return "done";
  if (startsWith(buf, start, end, ERROR_PREFIX) || startsWith(buf, start, end, ERROR_PREFIX_NOSPACE)) return "error";
  if (startsWith(buf, start, end, DATA_OBJECT) || startsWith(buf, start, end, DATA_OBJECT_NOSPACE)) {
    // A whole JSON object ends with '}'; anything else was cut or garbled.
    if (buf[end - 1] !== 125 /* '}' */) return "malformed";
    // The usage chunk is the one event with an empty choices array.
    if (indexOfBytes(buf, start, end, EMPTY_CHOICES) >= 0) return "usage";
    return "data";
  }
  return "malformed";
}

export interface ScannedEvent {
  kind: SseEventKind;
  /** The event's bytes including its trailing blank line. */
  bytes: Uint8Array;
}

/** The JSON payload of a data event, or undefined when it does not parse. */
export function eventJson(bytes: Uint8Array): unknown {
  const text = new TextDecoder().decode(bytes).trim();
  const payload = text.startsWith("data:") ? text.slice(5).trim() : text;
  try {
    return JSON.parse(payload);
  } catch {
    return undefined;
  }
}

/** No legitimate SSE event comes near this; an engine that never ends one must not grow us without bound. */
export const MAX_EVENT_BYTES = 16 * 1024 * 1024;

export class SseScanner {
  /** The incomplete tail, as received (joined only once a boundary can be in it). */
  private carry: Uint8Array[] = [];
  private carryLength = 0;
  /** An event grew past MAX_EVENT_BYTES without its blank line; the stream is broken. */
  overflowed = false;

  /** Complete events in `chunk` (plus any carried tail); keeps an incomplete tail for later. */
  push(chunk: Uint8Array): ScannedEvent[] {
    if (this.overflowed || chunk.length === 0) return [];
    if (this.carryLength > 0 && !this.blankLineEndsIn(chunk)) {
      // The event goes on: keep the chunk as it is (joining now would re-copy
      // the whole tail for every chunk of a long event).
      this.carry.push(chunk);
      this.carryLength += chunk.length;
      if (this.carryLength > MAX_EVENT_BYTES) this.overflow();
      return [];
    }
    let buf = chunk;
    let scanFrom = 0;
    if (this.carryLength > 0) {
      const joined = Buffer.concat([...this.carry, chunk], this.carryLength + chunk.length);
      // The carry held no boundary; only the seam and the new bytes need scanning.
      scanFrom = Math.max(0, this.carryLength - 3);
      buf = joined;
      this.carry = [];
      this.carryLength = 0;
    }
    const events: ScannedEvent[] = [];
    let eventStart = 0;
    for (let i = scanFrom; i < buf.length; i++) {
      if (buf[i] !== LF) continue;
      // Boundary: "\n\n" or "\n\r\n".
      let end = -1;
      if (buf[i + 1] === LF) end = i + 2;
      else if (buf[i + 1] === CR && buf[i + 2] === LF) end = i + 3;
      if (end < 0) continue;
      events.push({ kind: classifyEvent(buf, eventStart, i), bytes: buf.subarray(eventStart, end) });
      eventStart = end;
      i = end - 1;
    }
    if (eventStart < buf.length) {
      this.carry = [new Uint8Array(buf.subarray(eventStart))]; // a copy: the carry must not pin the joined buffer
      this.carryLength = buf.length - eventStart;
      if (this.carryLength > MAX_EVENT_BYTES) this.overflow();
    }
    return events;
  }

  /** Whether a blank line ("\n\n" or "\n\r\n") ends inside `chunk`, continuing the carried tail. */
  private blankLineEndsIn(chunk: Uint8Array): boolean {
    let i = chunk.indexOf(LF);
    if (i < 0) return false; // every boundary ends with LF
    const last = this.carry[this.carry.length - 1]!;
    const before = this.carry.length > 1 ? this.carry[this.carry.length - 2]! : undefined;
    // The byte `back` places before chunk[i], looking into the carry for negative indexes.
    const byteBefore = (at: number, back: number): number | undefined => {
      const j = at - back;
      if (j >= 0) return chunk[j];
      const k = last.length + j;
      if (k >= 0) return last[k];
      return before ? before[before.length + k] : undefined;
    };
    while (i >= 0) {
      const p1 = byteBefore(i, 1);
      if (p1 === LF || (p1 === CR && byteBefore(i, 2) === LF)) return true;
      i = chunk.indexOf(LF, i + 1);
    }
    return false;
  }

  private overflow(): void {
    this.overflowed = true;
    this.carry = [];
    this.carryLength = 0;
  }

  /** Bytes of an event that never got its blank line (the stream ended mid-event). */
  pending(): number {
    return this.carryLength;
  }
}
