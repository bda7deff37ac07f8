/** The shape the Responses and Messages streams share: named SSE events (`event: type` then `data: {json}`), read in place. */
import { bytesAt, CR, LF, nativeIndexOf, SPACE } from "../../shared/bytes.ts";
import { classifyEvent, type SseEventKind } from "./sse-scanner.ts";

const enc = new TextEncoder();
const decoder = new TextDecoder();
const EVENT = enc.encode("event:");
const DATA_LINE = enc.encode("\ndata:");

/** Where an event's type name lies in buf: [start, end), or undefined for an event without an `event:` line. */
export function typeSpan(buf: Uint8Array, start: number, end: number): [number, number] | undefined {
  if (!bytesAt(buf, start, EVENT, end)) return undefined;
  let i = start + EVENT.length;
  if (buf[i] === SPACE) i++;
  let j = i;
  while (j < end && buf[j] !== LF && buf[j] !== CR) j++;
  return [i, j];
}

/** Whether the type name at `span` is exactly `name`. */
export function typeIs(buf: Uint8Array, span: readonly [number, number], name: Uint8Array): boolean {
  return span[1] - span[0] === name.length && bytesAt(buf, span[0], name);
}

/** The JSON payload of an event (after its `data:` line's prefix), or undefined when it does not parse. */
export function namedEventJson(bytes: Uint8Array): Record<string, unknown> | undefined {
  const at = nativeIndexOf.call(bytes, DATA_LINE, 0);
  const from = at >= 0 ? at + DATA_LINE.length : bytesAt(bytes, 0, DATA_LINE.subarray(1)) ? DATA_LINE.length - 1 : -1;
  if (from < 0) return undefined;
  try {
    const v: unknown = JSON.parse(decoder.decode(bytes.subarray(from)));
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Classify one named event: blank or `:` lines are comments; an event with
 * an `event:` line and a `data:` line is classified by its type name in
 * place (`byName`, no parse); one without an `event:` line is read as
 * chat's would be ([DONE], an error object), else by its JSON's `type`
 * (`byType`).
 */
export function classifyNamedEvent(
  buf: Uint8Array,
  start: number,
  end: number,
  byName: (buf: Uint8Array, span: readonly [number, number]) => SseEventKind,
  byType: (type: string) => SseEventKind,
): SseEventKind {
  while (end > start && (buf[end - 1] === LF || buf[end - 1] === CR)) end--;
  if (end === start || buf[start] === 58 /* ':' */) return "comment";
  const span = typeSpan(buf, start, end);
  if (span === undefined) {
    const kind = classifyEvent(buf, start, end);
    if (kind !== "data" && kind !== "usage") return kind;
    const type = namedEventJson(buf.subarray(start, end))?.type;
    return typeof type === "string" ? byType(type) : "malformed";
  }
  const data = nativeIndexOf.call(buf, DATA_LINE, span[1]);
  if (data < 0 || data >= end) return "malformed";
  return byName(buf, span);
}
