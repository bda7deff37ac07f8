/**
 * Splits an upstream SSE byte stream into complete events without decoding
 * or re-splitting what was already scanned: each chunk is searched once (with
 * the runtime's native byte search) for blank-line boundaries, and only an
 * incomplete tail is carried to the next chunk. Classifies each event from
 * its bytes; JSON is parsed only for the rare events the gateway must read
 * (usage, errors).
 */

export type SseEventKind =
  | "data" // a JSON data event (a token chunk; a Responses API delta)
  | "usage" // the usage chunk: a data event whose choices array is empty
  | "error" // an error object sent in-stream (the Responses API's error and response.failed)
  | "done" // data: [DONE]
  | "comment" // ": keep-alive" and other comments
  | "meta" // a Responses API event that carries no token (response.created, output_item.added, … .done)
  | "final" // the Responses API's last event: response.completed or response.incomplete, with the usage
  | "malformed";

/** Classifies the event in buf[start, end) (without its trailing blank line): one per API's stream (chat's below, the Responses API's in responses-events.ts). */
export type EventClassifier = (buf: Uint8Array, start: number, end: number) => SseEventKind;

import { bytesAt, CR, LF, nativeIndexOf, SPACE, skipBlanks } from "../../shared/bytes.ts";

const enc = new TextEncoder();
const DATA = enc.encode("data:");
const DONE = enc.encode("[DONE]");
const ERROR_KEY = enc.encode('"error"');
const CHOICES_KEY = enc.encode('"choices"');

/**
 * Whether the JSON object in buf[start, end) has an empty "choices" array —
 * the usage chunk vLLM and SGLang send last, whatever whitespace they put
 * around it. The first "choices" key wins: a nested one would come after it.
 */
function hasEmptyChoices(buf: Uint8Array, start: number, end: number): boolean {
  const at = nativeIndexOf.call(buf, CHOICES_KEY, start);
  if (at < 0 || at >= end) return false;
  let i = skipBlanks(buf, at + CHOICES_KEY.length, end);
  if (buf[i] !== 58 /* ':' */) return false;
  i = skipBlanks(buf, i + 1, end);
  if (buf[i] !== 91 /* '[' */) return false;
  i = skipBlanks(buf, i + 1, end);
  return buf[i] === 93; /* ']' */
}

const FINISH_KEY = enc.encode('"finish_reason"');

/**
 * How many choices of the data event in buf[start, end) carry a finish_reason
 * that is not null (an answer's last chunk). Whitespace-tolerant, one native
 * search per occurrence; the token chunks in between carry "finish_reason":null.
 */
export function finishedChoices(buf: Uint8Array, start: number, end: number): number {
  let n = 0;
  for (let at = nativeIndexOf.call(buf, FINISH_KEY, start); at >= 0 && at < end; at = nativeIndexOf.call(buf, FINISH_KEY, at + FINISH_KEY.length)) {
    let i = skipBlanks(buf, at + FINISH_KEY.length, end);
    if (buf[i] !== 58 /* ':' */) continue;
    i = skipBlanks(buf, i + 1, end);
    if (i < end && buf[i] !== 110 /* 'n'ull */) n++;
  }
  return n;
}

/** Classify the event occupying buf[start, end) (without its trailing blank line). */
export function classifyEvent(buf: Uint8Array, start: number, end: number): SseEventKind {
  while (end > start && (buf[end - 1] === LF || buf[end - 1] === CR)) end--;
  if (end === start) return "comment";
  if (buf[start] === 58 /* ':' */) return "comment";
  // SSE allows "data:" with or without the space (WHATWG HTML, server-sent events).
  if (!bytesAt(buf, start, DATA, end)) return "malformed";
  let i = start + DATA.length;
  if (buf[i] === SPACE) i++;
  if (bytesAt(buf, i, DONE, end)) return "done";
  if (buf[i] !== 123 /* '{' */) return "malformed";
  // A whole JSON object ends with '}'; anything else was cut or garbled.
  if (buf[end - 1] !== 125 /* '}' */) return "malformed";
  const key = skipBlanks(buf, i + 1, end);
  if (bytesAt(buf, key, ERROR_KEY, end)) return "error";
  return hasEmptyChoices(buf, key, end) ? "usage" : "data";
}

/** One complete event: its kind and where it lies in `buf`, blank line included. */
export type EventVisitor = (kind: SseEventKind, buf: Uint8Array, start: number, end: number) => void;

export interface ScannedEvent {
  kind: SseEventKind;
  /** The event's bytes including its trailing blank line. */
  bytes: Uint8Array;
}

const eventDecoder = new TextDecoder();

/** The JSON payload of a data event, or undefined when it does not parse. */
export function eventJson(bytes: Uint8Array): unknown {
  const text = eventDecoder.decode(bytes).trim();
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
  /** `classify`: how this stream's events are told apart (chat's and completions' by default). */
  constructor(private readonly classify: EventClassifier = classifyEvent) {}

  /** The incomplete tail, as received (joined only once a boundary can be in it). */
  private carry: Uint8Array[] = [];
  private carryLength = 0;
  /** An event grew past MAX_EVENT_BYTES without its blank line; the stream is broken. */
  overflowed = false;

  /** Complete events in `chunk` (plus any carried tail), as objects; keeps an incomplete tail for later. */
  push(chunk: Uint8Array): ScannedEvent[] {
    const events: ScannedEvent[] = [];
    this.scan(chunk, (kind, buf, start, end) => events.push({ kind, bytes: buf.subarray(start, end) }));
    return events;
  }

  /**
   * Visit the complete events in `chunk` (plus any carried tail) in order,
   * allocating nothing per event: `visit` gets each event's kind and its
   * place in `buf` (the chunk itself, or the carried tail joined to it),
   * blank line included. Keeps an incomplete tail for later. The relay's hot
   * path: one upstream chunk usually is one whole event, forwarded as is.
   */
  scan(chunk: Uint8Array, visit: EventVisitor): void {
    if (this.overflowed || chunk.length === 0) return;
    if (this.carryLength > 0 && !this.blankLineEndsIn(chunk)) {
      // The event goes on: keep the chunk as it is (joining now would re-copy
      // the whole tail for every chunk of a long event).
      this.carry.push(chunk);
      this.carryLength += chunk.length;
      if (this.carryLength > MAX_EVENT_BYTES) this.overflow();
      return;
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
    let eventStart = 0;
    for (let i = buf.indexOf(LF, scanFrom); i >= 0; i = buf.indexOf(LF, i + 1)) {
      // Boundary: "\n\n" or "\n\r\n".
      let end = -1;
      if (buf[i + 1] === LF) end = i + 2;
      else if (buf[i + 1] === CR && buf[i + 2] === LF) end = i + 3;
      if (end < 0) continue;
      visit(this.classify(buf, eventStart, i), buf, eventStart, end);
      eventStart = end;
      i = end - 1;
    }
    if (eventStart < buf.length) {
      this.carry = [new Uint8Array(buf.subarray(eventStart))]; // a copy: the carry must not pin the joined buffer
      this.carryLength = buf.length - eventStart;
      if (this.carryLength > MAX_EVENT_BYTES) this.overflow();
    }
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
