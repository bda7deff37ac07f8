/**
 * Mid-stream continuation of a Responses API stream: where the engine can
 * take the delivered text as a prefill — vLLM continues a final assistant
 * message whose status is in_progress (responses/utils.py
 * should_continue_final_message), as it continues a chat message with
 * continue_final_message — the answer is finished on another replica and
 * the client sees one stream. What can be continued exactly: one text
 * output item; no tools offered, no structured output, no logprobs (the
 * same reasons as chat); a stream that started a function_call item or a
 * reasoning item is not resumable (arguments are never spliced).
 *
 * The tracker reads the original stream's events as they go out (its
 * response.created once for the identity, its message item's id, each
 * delta's text); the continuation body is the input plus the delivered text
 * as an in_progress assistant message, max_output_tokens reduced; the
 * rewriter turns the continuation's events into the rest of the original
 * stream: its opening events (created, in_progress, the item and part
 * added) dropped, its deltas and closing events under the original item id
 * and response id, numbered on from the original's sequence, the closing
 * texts and the final response holding the whole text, and one honest usage
 * (the original prompt, every output token). JSON is parsed per event of a
 * continuation only; the original stream is read as bytes.
 */

import { inputItems } from "../../jobs/responses-objects.ts";
import { bytesAt, nativeIndexOf } from "../../shared/bytes.ts";
import type { ScannedEvent } from "../proxy/sse-scanner.ts";
import type { Usage } from "../request/exchange.ts";
import { keyBytes, stringEnd, valueAt } from "./chunk-bytes.ts";
import type { Continuability } from "./continuation-body.ts";
import type { ResumePoint } from "./stream-tracker.ts";

type Obj = Record<string, unknown>;
type Body = Readonly<Obj>;

const enc = new TextEncoder();
const decoder = new TextDecoder();
const EVENT_TEXT_DELTA = enc.encode("event: response.output_text.delta\n");
const EVENT_ITEM_ADDED = enc.encode("event: response.output_item.added\n");
const EVENT_CREATED = enc.encode("event: response.created\n");
const EVENT_TEXT_DONE = enc.encode("event: response.output_text.done\n");
const EVENT_OTHER_DELTA = enc.encode("event: response.");
const DELTA = keyBytes("delta");
const SEQUENCE = keyBytes("sequence_number");
const DATA_LINE = enc.encode("\ndata:");

function present(v: unknown): boolean {
  return v !== undefined && v !== null && v !== false;
}

/** Whether a Responses API request's answer can be finished exactly by a continuation. */
export function responsesContinuable(body: Body): Continuability {
  if (body.stream !== true) return { ok: false, reason: "not_streaming" };
  if (Array.isArray(body.tools) && body.tools.length > 0 && body.tool_choice !== "none") return { ok: false, reason: "tools" };
  const include = body.include;
  if ((typeof body.top_logprobs === "number" && body.top_logprobs > 0) || (Array.isArray(include) && include.includes("message.output_text.logprobs")))
    return { ok: false, reason: "logprobs" };
  const text = body.text;
  const format = typeof text === "object" && text !== null ? (text as Obj).format : undefined;
  if (typeof format === "object" && format !== null && (format as Obj).type !== "text") return { ok: false, reason: "structured_output" };
  if (present(body.structured_outputs)) return { ok: false, reason: "structured_output" };
  if (typeof body.input !== "string" && !Array.isArray(body.input)) return { ok: false, reason: "prompt_not_text" };
  return { ok: true };
}

/** The body that continues `original` after `text` (`tokens` tokens) reached the client; undefined when max_output_tokens is spent. */
export function responsesContinuationBody(original: Body, text: string, tokens: number, model?: string): string | undefined {
  const out: Obj = { ...original, model: model ?? original.model, stream: true };
  if (typeof original.max_output_tokens === "number") {
    const left = original.max_output_tokens - tokens;
    if (left < 1) return undefined;
    out.max_output_tokens = left;
  }
  if (text === "" && tokens === 0) return JSON.stringify(out);
  out.input = [...inputItems(original.input), { type: "message", role: "assistant", status: "in_progress", content: [{ type: "output_text", text }] }];
  return JSON.stringify(out);
}

/** What the client has of the answer: text, tokens, where its stream stands. */
class Delivered {
  text: string;
  tokens: number;
  finished = false;
  inexact: "tool_calls" | "reasoning" | "unreadable_chunk" | undefined;
  /** The sequence_number of the last event out (the continuation numbers on from it). */
  lastSequence = -1;

  constructor(before: { text: string; tokens: number }) {
    this.text = before.text;
    this.tokens = before.tokens;
  }

  point(identity: ResponsesIdentity | undefined): ResumePoint {
    if (this.finished) return { ok: false, reason: "finished" };
    if (this.inexact) return { ok: false, reason: this.inexact };
    if (identity === undefined || identity.itemId === undefined) return { ok: false, reason: "no_chunk_yet" };
    return { ok: true, text: this.text, tokens: this.tokens };
  }
}

/** What every event of one client-visible Responses stream carries. */
interface ResponsesIdentity {
  id: string;
  createdAt: number;
  /** The response object of response.created (the final response is built on the continuation's, with these fields). */
  itemId?: string;
}

function payload(bytes: Uint8Array): Obj | undefined {
  const at = nativeIndexOf.call(bytes, DATA_LINE, 0);
  if (at < 0) return undefined;
  try {
    const v: unknown = JSON.parse(decoder.decode(bytes.subarray(at + DATA_LINE.length)));
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Obj) : undefined;
  } catch {
    return undefined;
  }
}

function readSequence(bytes: Uint8Array): number | undefined {
  const v = valueAt(bytes, SEQUENCE, 0);
  if (v < 0) return undefined;
  let n = 0;
  let i = v;
  while (bytes[i]! >= 48 && bytes[i]! <= 57) n = n * 10 + (bytes[i++]! - 48);
  return i > v ? n : undefined;
}

/** Watches the original stream's events as they go to the client. */
export class ResponsesTracker {
  private readonly d = new Delivered({ text: "", tokens: 0 });
  identity: ResponsesIdentity | undefined;

  /** A data or meta event went to the client. */
  observeData(bytes: Uint8Array): void {
    const seq = readSequence(bytes);
    if (seq !== undefined) this.d.lastSequence = seq;
    if (bytesAt(bytes, 0, EVENT_TEXT_DELTA)) {
      const v = valueAt(bytes, DELTA, EVENT_TEXT_DELTA.length);
      const end = v >= 0 && bytes[v] === 34 ? stringEnd(bytes, v + 1) : -1;
      if (end < 0) {
        this.d.inexact ??= "unreadable_chunk";
        return;
      }
      this.d.text += JSON.parse(decoder.decode(bytes.subarray(v, end + 1))) as string;
      this.d.tokens++;
      return;
    }
    if (bytesAt(bytes, 0, EVENT_CREATED)) {
      const r = payload(bytes)?.response as Obj | undefined;
      if (typeof r?.id === "string") this.identity = { id: r.id, createdAt: typeof r.created_at === "number" ? r.created_at : 0 };
      return;
    }
    if (bytesAt(bytes, 0, EVENT_ITEM_ADDED)) {
      const item = payload(bytes)?.item as Obj | undefined;
      if (item?.type === "message" && typeof item.id === "string" && this.identity !== undefined && this.identity.itemId === undefined)
        this.identity.itemId = item.id;
      else if (item?.type === "function_call") this.d.inexact ??= "tool_calls";
      else if (item?.type === "reasoning") this.d.inexact ??= "reasoning";
      return;
    }
    if (bytesAt(bytes, 0, EVENT_TEXT_DONE)) {
      this.d.finished = true;
      return;
    }
    // Another delta (reasoning, refusal, arguments): nothing a prefill can carry.
    if (bytesAt(bytes, 0, EVENT_OTHER_DELTA)) {
      const line = decoder.decode(bytes.subarray(0, Math.min(bytes.length, 96)));
      if (/^event: response\.[a-z_.]+\.delta\n/.test(line)) this.d.inexact ??= line.includes("reasoning") ? "reasoning" : "tool_calls";
    }
  }

  resumePoint(): ResumePoint {
    return this.d.point(this.identity);
  }

  /** The rewriter of a continuation that starts from `before` (a resume point of this stream or of an earlier continuation). */
  segment(before: { text: string; tokens: number }, lastSequence = this.d.lastSequence): ResponsesContinuationRewriter {
    return new ResponsesContinuationRewriter(this.identity!, before, lastSequence);
  }
}

function eventBytes(type: string, body: Obj): Uint8Array {
  return enc.encode(`event: ${type}\ndata: ${JSON.stringify({ ...body, type })}\n\n`);
}

/** Rewrites a continuation's events into the rest of the original stream. */
class ResponsesContinuationRewriter {
  usage: Usage | undefined;
  private readonly d: Delivered;
  private seq: number;
  private readonly beforeTokens: number;

  constructor(
    private readonly identity: ResponsesIdentity,
    before: { text: string; tokens: number },
    lastSequence: number,
  ) {
    this.d = new Delivered(before);
    this.seq = lastSequence;
    this.beforeTokens = before.tokens;
  }

  resumePoint(): ResumePoint {
    return this.d.point(this.identity);
  }

  /** A continuation breaking too: the next one starts from here. */
  segment(before: { text: string; tokens: number }): ResponsesContinuationRewriter {
    return new ResponsesContinuationRewriter(this.identity, before, this.seq);
  }

  rewrite(event: ScannedEvent): Uint8Array | undefined {
    if (event.kind !== "data" && event.kind !== "meta" && event.kind !== "final") return event.bytes;
    const e = payload(event.bytes);
    const type = e?.type;
    if (e === undefined || typeof type !== "string") {
      this.d.inexact ??= "unreadable_chunk";
      return event.bytes;
    }
    const itemId = this.identity.itemId!;
    const next = (body: Obj) => {
      this.seq++;
      return eventBytes(type, { ...body, sequence_number: this.seq });
    };
    switch (type) {
      case "response.created":
      case "response.in_progress":
      case "response.content_part.added":
        return undefined; // the client had these from the original
      case "response.output_item.added": {
        const item = e.item as Obj | undefined;
        if (item?.type !== "message") this.d.inexact ??= item?.type === "reasoning" ? "reasoning" : "tool_calls";
        return item?.type === "message" ? undefined : next(e);
      }
      case "response.output_text.delta":
        if (typeof e.delta === "string") this.d.text += e.delta;
        this.d.tokens++;
        return next({ ...e, item_id: itemId });
      case "response.output_text.done":
        this.d.finished = true;
        return next({ ...e, item_id: itemId, text: this.d.text });
      case "response.content_part.done":
        return next({ ...e, item_id: itemId, part: { ...(e.part as Obj), text: this.d.text } });
      case "response.output_item.done":
        return next({ ...e, item: this.wholeItem(e.item) });
      case "response.completed":
      case "response.incomplete":
        return next({ ...e, response: this.wholeResponse(e.response) });
      default:
        if (type.endsWith(".delta")) this.d.inexact ??= type.includes("reasoning") ? "reasoning" : "tool_calls";
        return next(e);
    }
  }

  /** The message item as the whole answer: the original's id, the whole text. */
  private wholeItem(item: unknown): Obj {
    const i = (typeof item === "object" && item !== null ? item : {}) as Obj;
    const content = Array.isArray(i.content)
      ? i.content.map((c: unknown, k) => (k === 0 && typeof c === "object" && c !== null ? { ...(c as Obj), text: this.d.text } : c))
      : i.content;
    return { ...i, id: this.identity.itemId, content };
  }

  /** The final response as the original's: its id and creation time, the whole text, one honest usage. */
  private wholeResponse(response: unknown): Obj {
    const r = { ...((typeof response === "object" && response !== null ? response : {}) as Obj) };
    r.id = this.identity.id;
    r.created_at = this.identity.createdAt;
    if (Array.isArray(r.output)) r.output = r.output.map((item: unknown) => ((item as Obj | null)?.type === "message" ? this.wholeItem(item) : item));
    const u = r.usage as Obj | undefined;
    if (u && typeof u.input_tokens === "number" && typeof u.output_tokens === "number") {
      // The continuation's prompt held the delivered tokens; they were output of this answer.
      const input = Math.max(0, u.input_tokens - this.beforeTokens);
      const output = this.beforeTokens + u.output_tokens;
      r.usage = { ...u, input_tokens: input, output_tokens: output, total_tokens: input + output };
      this.usage = { prompt_tokens: input, completion_tokens: output };
    }
    return r;
  }
}
