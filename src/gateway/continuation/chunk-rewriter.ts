/**
 * Rewrites a continuation's stream so that the client sees one seamless
 * answer: every chunk carries the original stream's id, created and model;
 * the continuation's role delta is dropped (the client already had one);
 * its usage chunk becomes one honest usage for the whole answer (the
 * original request's prompt tokens, every completion token delivered); and
 * what passes through is tracked, so a continuation that breaks too can be
 * continued again. Per chunk it compares the chunk's leading bytes with the
 * continuation's envelope (`data: {"id":…,"object":…,"created":…,"model":…,`,
 * learnt from its first chunk) and splices the original envelope in; JSON is
 * parsed only for the first chunk, the usage chunk, and a chunk whose
 * envelope differs (none, from vLLM, SGLang or the sim).
 */
import type { Route } from "../../metrics/names.ts";
import type { ScannedEvent } from "../proxy/sse-scanner.ts";
import type { Usage } from "../request/exchange.ts";
import { dataPayloadAt, keyAt, keyBytes, startsWithBytes, valueAt } from "./chunk-bytes.ts";
import { Delivery } from "./delivery.ts";
import { type ResumePoint, resumePointOf, type StreamIdentity } from "./stream-tracker.ts";

const CHOICES = keyBytes("choices");
const ROLE = keyBytes("role");
const enc = new TextEncoder();
const decoder = new TextDecoder();

type Json = Record<string, unknown>;

const UNREADABLE = Symbol("unreadable");

function parseEvent(bytes: Uint8Array): Json | undefined {
  const at = dataPayloadAt(bytes);
  if (at < 0) return undefined;
  try {
    const v: unknown = JSON.parse(decoder.decode(bytes.subarray(at)));
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : undefined;
  } catch {
    return undefined;
  }
}

function eventBytes(obj: Json): Uint8Array {
  return enc.encode(`data: ${JSON.stringify(obj)}\n\n`);
}

interface RewriterOptions {
  /** The original request's prompt tokens, when known; otherwise the continuation's prompt tokens less what was delivered before it. */
  originalPromptTokens?: number;
}

export class ContinuationRewriter {
  /** What this answer has delivered, earlier segments included. */
  readonly delivery: Delivery;
  /** The honest usage of the whole answer, once the continuation's usage chunk has passed. */
  usage: Usage | undefined;
  private readonly chat: boolean;
  private seenData = false;
  /** The continuation's envelope bytes and the original's, once learnt (undefined: no fast path). */
  private contEnvelope: Uint8Array | undefined;
  private origEnvelope: Uint8Array | undefined;

  constructor(
    route: Route,
    /** The original stream's identity (StreamTracker.identity). */
    readonly identity: StreamIdentity,
    /** What was delivered before this continuation (the previous segment's resume point). */
    before: { text: string; tokens: number },
    private readonly options: RewriterOptions = {},
  ) {
    this.chat = route === "chat";
    this.delivery = new Delivery(route, before);
  }

  /** The bytes the client should get for this event of the continuation's stream, or undefined to drop it. */
  rewrite(event: ScannedEvent): Uint8Array | undefined {
    switch (event.kind) {
      case "data":
        return this.data(event.bytes);
      case "usage":
        return this.usageChunk(event.bytes);
      default:
        // [DONE], comments, errors and malformed events are the relay's to handle, as on any stream.
        return event.bytes;
    }
  }

  /** This continuation broke too: what the next one would start from, or why there is none. */
  resumePoint(): ResumePoint {
    return resumePointOf(this.delivery, this.identity);
  }

  private data(bytes: Uint8Array): Uint8Array | undefined {
    if (!this.seenData) {
      this.seenData = true;
      this.learnEnvelope(bytes);
      // The continuation opens with its own role delta (vLLM and SGLang send it first, alone).
      if (this.chat && this.hasRole(bytes)) {
        const rest = this.withoutRole(bytes);
        if (rest !== UNREADABLE) return rest;
      }
    }
    this.delivery.observe(bytes);
    const cont = this.contEnvelope;
    if (cont !== undefined && startsWithBytes(bytes, cont)) {
      const orig = this.origEnvelope!;
      const out = new Uint8Array(orig.length + bytes.length - cont.length);
      out.set(orig, 0);
      out.set(bytes.subarray(cont.length), orig.length);
      return out;
    }
    const obj = parseEvent(bytes);
    return obj ? eventBytes(this.withIdentity(obj)) : bytes;
  }

  private hasRole(bytes: Uint8Array): boolean {
    const choices = valueAt(bytes, CHOICES, 0);
    const role = choices < 0 ? -1 : valueAt(bytes, ROLE, choices);
    return role >= 0 && bytes[role] === 34; /* a string; SGLang sends "role":null on later chunks */
  }

  /** The role chunk without its role: nothing (the usual `{"role":"assistant","content":""}`), or the rest of it; UNREADABLE to treat it as any chunk. */
  private withoutRole(bytes: Uint8Array): Uint8Array | undefined | typeof UNREADABLE {
    const obj = parseEvent(bytes);
    const choice = obj && Array.isArray(obj.choices) ? (obj.choices[0] as Json | undefined) : undefined;
    const delta = choice && typeof choice.delta === "object" && choice.delta !== null ? (choice.delta as Json) : undefined;
    if (!obj || !choice || !delta) return UNREADABLE;
    delete delta.role;
    const carries = Object.entries(delta).some(([k, v]) => v !== null && v !== "" && !(Array.isArray(v) && v.length === 0) && k !== "role");
    if (!carries && (choice.finish_reason === null || choice.finish_reason === undefined)) return undefined;
    const out = eventBytes(this.withIdentity(obj));
    this.delivery.observe(out);
    return out;
  }

  /** The honest usage chunk: the original prompt, every completion token delivered, under the original identity. */
  private usageChunk(bytes: Uint8Array): Uint8Array {
    const obj = parseEvent(bytes);
    const u = obj && typeof obj.usage === "object" && obj.usage !== null ? (obj.usage as Json) : undefined;
    if (!obj || !u) return bytes;
    if (typeof u.completion_tokens === "number") this.delivery.settleTokens(u.completion_tokens);
    const prompt =
      this.options.originalPromptTokens ?? (typeof u.prompt_tokens === "number" ? Math.max(0, u.prompt_tokens - this.delivery.tokensBefore) : undefined);
    if (prompt !== undefined && typeof u.completion_tokens === "number") {
      const completion = this.delivery.tokens;
      // prompt_tokens_details (cached tokens) described the continuation's prompt, not the client's: dropped.
      obj.usage = { prompt_tokens: prompt, total_tokens: prompt + completion, completion_tokens: completion };
      this.usage = { prompt_tokens: prompt, completion_tokens: completion };
    }
    return eventBytes(this.withIdentity(obj));
  }

  private withIdentity(obj: Json): Json {
    const { id, created, model } = this.identity;
    // Assigning existing keys keeps their order (vLLM's: id, object, created, model, choices …).
    obj.id = id;
    obj.created = created;
    obj.model = model;
    return obj;
  }

  /**
   * The bytes before "choices" in the first chunk are the envelope every
   * chunk of this stream starts with; the original's is the same object
   * with the original's values.
   */
  private learnEnvelope(bytes: Uint8Array): void {
    const at = dataPayloadAt(bytes);
    const choices = at < 0 ? -1 : keyAt(bytes, CHOICES, at);
    if (choices < 0) return;
    const head = decoder.decode(bytes.subarray(at, choices)).trimEnd();
    if (!head.endsWith(",")) return;
    let obj: unknown;
    try {
      obj = JSON.parse(`${head.slice(0, -1)}}`);
    } catch {
      return;
    }
    if (typeof obj !== "object" || obj === null || Array.isArray(obj)) return;
    const orig = JSON.stringify(this.withIdentity(obj as Json));
    this.contEnvelope = bytes.slice(0, choices);
    this.origEnvelope = enc.encode(`data: ${orig.slice(0, -1)},`);
  }
}
