/**
 * Watches the original stream's events as they go to the client, so that if
 * the stream breaks the gateway knows what the client already has: the text
 * and token count (a Delivery), the stream's identity (id, created, model,
 * read once from its first chunk), and whether a continuation could finish
 * it exactly. Runs per event on the hot path; see delivery.ts for the cost.
 */
import type { Route } from "../../metrics/names.ts";
import { skipBlanks } from "../../shared/bytes.ts";
import type { ScannedEvent } from "../proxy/sse-scanner.ts";
import { dataPayloadAt, keyAt, keyBytes, readUint, stringEnd, valueAt } from "./chunk-bytes.ts";
import { Delivery, type InexactReason } from "./delivery.ts";

/** What every chunk of one client-visible stream carries, whichever engine wrote it. */
export interface StreamIdentity {
  id: string;
  created: number;
  model: string;
}

/** Why a broken stream cannot be continued now (no_chunk_yet: no data chunk with an id, created and model went out). */
type NotResumable = InexactReason | "finished" | "no_chunk_yet";

const decoder = new TextDecoder();

const ID = keyBytes("id");
const CREATED = keyBytes("created");
const MODEL = keyBytes("model");
const CHOICES = keyBytes("choices");

/**
 * A string value that is plain ASCII with no escape, decoded; undefined
 * otherwise (the caller then parses the chunk).
 */
function plainString(event: Uint8Array, v: number, before: number): string | undefined {
  if (v < 0 || v >= before || event[v] !== 34 /* " */) return undefined;
  const end = stringEnd(event, v + 1);
  if (end < 0 || end >= before) return undefined;
  for (let i = v + 1; i < end; i++) if (event[i] === 92 /* \ */ || event[i]! > 127) return undefined;
  return decoder.decode(event.subarray(v + 1, end));
}

/** A non-negative integer value ending at a `,` `}` or blank (not 1.5 or 1e9), or undefined. */
function plainInteger(event: Uint8Array, v: number, before: number): number | undefined {
  if (v < 0 || v >= before) return undefined;
  const n = readUint(event, v);
  if (n === undefined) return undefined;
  let end = v;
  while (event[end]! >= 48 && event[end]! <= 57) end++;
  const next = event[skipBlanks(event, end)];
  return next === 44 /* , */ || next === 125 /* } */ ? n : undefined;
}

/**
 * The id, created and model of a chunk, once per stream. Read as bytes when
 * all three stand before "choices" (the envelope vLLM and SGLang write first,
 * so a nested "id" of a tool call cannot be taken for it) as plain strings
 * and an integer; parsed as JSON otherwise.
 */
export function identityOf(event: Uint8Array): StreamIdentity | undefined {
  const at = dataPayloadAt(event);
  if (at < 0) return undefined;
  const choices = keyAt(event, CHOICES, at);
  if (choices >= 0) {
    const id = plainString(event, valueAt(event, ID, at), choices);
    const model = plainString(event, valueAt(event, MODEL, at), choices);
    const created = plainInteger(event, valueAt(event, CREATED, at), choices);
    if (id !== undefined && model !== undefined && created !== undefined) return { id, created, model };
  }
  return parsedIdentity(event.subarray(at));
}

function parsedIdentity(payload: Uint8Array): StreamIdentity | undefined {
  let json: unknown;
  try {
    json = JSON.parse(decoder.decode(payload));
  } catch {
    return undefined;
  }
  if (typeof json !== "object" || json === null) return undefined;
  const { id, created, model } = json as Record<string, unknown>;
  if (typeof id !== "string" || typeof created !== "number" || typeof model !== "string") return undefined;
  return { id, created, model };
}

/** Where a broken answer stands: what to continue from, or why it cannot be continued. */
export type ResumePoint = { ok: true; text: string; tokens: number } | { ok: false; reason: NotResumable };

/** The resume point of an answer with this delivery and identity. */
export function resumePointOf(d: Delivery, identity: StreamIdentity | undefined): ResumePoint {
  if (d.finished) return { ok: false, reason: "finished" };
  if (d.inexact) return { ok: false, reason: d.inexact };
  if (!identity) return { ok: false, reason: "no_chunk_yet" };
  const text = d.text();
  if (text === undefined) return { ok: false, reason: "unreadable_chunk" };
  return { ok: true, text, tokens: d.tokens };
}

export class StreamTracker {
  readonly delivery: Delivery;
  /** The original stream's identity, from its first data event; continuation chunks are rewritten to it. */
  identity: StreamIdentity | undefined;
  /** Parsing for the identity is tried on the first data event only: a stream whose chunks lack one is not parsed per chunk. */
  private sawData = false;

  constructor(route: Route) {
    this.delivery = new Delivery(route);
  }

  /** An event of the original stream went to the client (call it for each one the relay forwards). */
  observe(event: ScannedEvent): void {
    if (event.kind === "data") this.observeData(event.bytes);
  }

  /** A data event (its bytes, `data: {…}`) went to the client: the relay's form of observe(), with no event object per chunk. */
  observeData(bytes: Uint8Array): void {
    if (!this.sawData) {
      this.sawData = true;
      this.identity = identityOf(bytes);
    }
    this.delivery.observe(bytes);
  }

  /** The stream broke: what a continuation would start from, or why there is none. */
  resumePoint(): ResumePoint {
    return resumePointOf(this.delivery, this.identity);
  }
}
