/** One request's spans on the OpenTelemetry API, named and attributed after the GenAI semantic conventions (gen-ai-spans.md). */
import { type Attributes, type Context, type Span, SpanKind, SpanStatusCode, type Tracer, trace } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import type { BreakCause, Outcome, RecoveryResult } from "../metrics/names.ts";
import type { ErrorCode } from "../shared/errors.ts";
import type { RequestTrace } from "./tracer-contract.ts";

export const propagator = new W3CTraceContextPropagator();
const recordSetter = {
  set(carrier: Record<string, string>, key: string, value: string) {
    carrier[key] = value;
  },
};

/** A JSON answer is parsed for its id and finish reasons only up to this size (a larger one is streamed through, not held). */
const MAX_PARSED_ANSWER_BYTES = 4 * 1024 * 1024;

/** Endpoint URLs already parsed (a fleet has a few hundred at most; bounded all the same). */
const servers = new Map<string, Attributes>();
const MAX_SERVERS = 4096;

/** Where an engine listens, as server.address and server.port (the URL's default port when it names none). */
function serverOf(url: string): Attributes {
  let attrs = servers.get(url);
  if (attrs !== undefined) return attrs;
  try {
    const u = new URL(url);
    const port = u.port !== "" ? Number(u.port) : u.protocol === "https:" ? 443 : 80;
    attrs = { "server.address": u.hostname.replace(/^\[|\]$/g, ""), "server.port": port };
  } catch {
    attrs = {};
  }
  if (servers.size >= MAX_SERVERS) servers.clear();
  servers.set(url, attrs);
  return attrs;
}

const decoder = new TextDecoder();

/** The JSON of one SSE event (`data: {...}`, after an `event:` line in Anthropic's streams), or undefined. */
function eventJson(event: Uint8Array): unknown {
  const text = decoder.decode(event).trim();
  const data = text.startsWith("data:") ? 0 : text.indexOf("\ndata:") + 1;
  try {
    return JSON.parse(data > 0 || text.startsWith("data:") ? text.slice(data + 5) : text);
  } catch {
    return undefined;
  }
}

type Identity = { id?: unknown; model?: unknown };
/** The fields read of an answer: chat's and completions' choices, the Responses API's `response`, Anthropic's `message` and `message_delta`. */
type Answer = Identity & { choices?: unknown; response?: Identity; message?: Identity; stop_reason?: unknown; delta?: { stop_reason?: unknown } };

export class OtelRequestTrace implements RequestTrace {
  private admission: Span | undefined;
  private attemptSpan: Span | undefined;
  private continuation: Span | undefined;
  /** The continuation's context while one is looked for: its attempts and decisions are its children. */
  private continuationCtx: Context | undefined;
  private attempts = 0;
  private responseId: string | undefined;
  private responseModel: string | undefined;
  private finishReasons: string[] | undefined;

  constructor(
    private readonly tracer: Tracer,
    private readonly span: Span,
    /** The request span's context: the parent of its children. */
    private readonly ctx: Context,
    /** gen_ai.operation.name: the span name's first word. */
    private readonly operation: string,
  ) {}

  private get parent(): Context {
    return this.continuationCtx ?? this.ctx;
  }

  parsed(model: string, stream: boolean): void {
    this.span.updateName(`${this.operation} ${model}`);
    this.span.setAttributes({ "gen_ai.request.model": model, "llmgw.stream": stream });
  }

  admitting(band: string): void {
    this.admission = this.tracer.startSpan("admission", { attributes: { "llmgw.band": band } }, this.ctx);
  }

  scheduled(
    grant: { scores: Record<string, number>; drops: Record<string, number>; candidates: number; waitedMs: number; path?: string },
    endpointId: string | undefined,
    model: string,
  ): void {
    const a = this.admission;
    if (a !== undefined) {
      this.admission = undefined;
      a.setAttribute("llmgw.admission.waited_ms", grant.waitedMs);
      if (grant.path !== undefined) a.setAttribute("llmgw.admission.path", grant.path);
      a.end();
    }
    const attrs: Attributes = { "gen_ai.request.model": model, "llmgw.scheduling.candidates": grant.candidates };
    if (endpointId !== undefined) attrs["llmgw.endpoint"] = endpointId;
    for (const name in grant.scores) attrs[`llmgw.scheduling.score.${name}`] = grant.scores[name];
    for (const name in grant.drops) if (grant.drops[name]! > 0) attrs[`llmgw.scheduling.dropped.${name}`] = grant.drops[name];
    this.tracer.startSpan("scheduling", { attributes: attrs }, this.parent).end();
  }

  unscheduled(code: string): void {
    const a = this.admission;
    if (a === undefined) return;
    this.admission = undefined;
    a.setAttribute("error.type", code);
    a.setStatus({ code: SpanStatusCode.ERROR, message: code });
    a.end();
  }

  attempt(headers: Record<string, string>, url: string, endpointId: string | undefined, model: string): void {
    this.attemptSpan?.end(); // (an attempt always ends before the next; never two open)
    const server = serverOf(url);
    const attrs: Attributes = { "gen_ai.operation.name": this.operation, "gen_ai.request.model": model, "llmgw.attempt": ++this.attempts, ...server };
    if (endpointId !== undefined) attrs["llmgw.endpoint"] = endpointId;
    const span = this.tracer.startSpan("attempt", { kind: SpanKind.CLIENT, attributes: attrs }, this.parent);
    this.attemptSpan = span;
    // The engine's own spans (vLLM continues a traceparent) become this attempt's children.
    propagator.inject(trace.setSpan(this.parent, span), headers, recordSetter);
    this.span.setAttributes(server);
  }

  attemptEnded(verdict: { kind: string; failure?: string }): void {
    const s = this.attemptSpan;
    if (s === undefined) return;
    this.attemptSpan = undefined;
    s.setAttribute("llmgw.verdict", verdict.kind);
    if (verdict.failure !== undefined) {
      s.setAttribute("error.type", verdict.failure);
      s.setStatus({ code: SpanStatusCode.ERROR, message: verdict.failure });
    }
    s.end();
  }

  answered(model: string): void {
    this.responseModel ??= model;
    this.attemptSpan?.setAttribute("gen_ai.response.model", model);
  }

  answerBody(body: Uint8Array): void {
    if (body.byteLength > MAX_PARSED_ANSWER_BYTES) return;
    let json: unknown;
    try {
      json = JSON.parse(decoder.decode(body));
    } catch {
      return;
    }
    this.identity(json);
    this.reasons(json);
  }

  firstEvent(event: Uint8Array): void {
    this.identity(eventJson(event));
  }

  finishEvent(event: Uint8Array): void {
    this.reasons(eventJson(event));
  }

  firstToken(ttftMs: number): void {
    this.span.setAttribute("gen_ai.response.time_to_first_chunk", ttftMs / 1000);
    this.span.addEvent("gen_ai.first_token");
  }

  continuing(cause: BreakCause): void {
    const span = this.tracer.startSpan("continuation", { attributes: { "llmgw.break_cause": cause } }, this.ctx);
    this.continuation = span;
    this.continuationCtx = trace.setSpan(this.ctx, span);
  }

  continued(result: RecoveryResult, reason?: string): void {
    const s = this.continuation;
    if (s === undefined) return;
    this.continuation = undefined;
    this.continuationCtx = undefined;
    s.setAttribute("llmgw.recovery", result);
    if (reason !== undefined) s.setAttribute("llmgw.recovery_reason", reason);
    if (result !== "recovered") s.setStatus({ code: SpanStatusCode.ERROR, message: result });
    s.end();
  }

  finish(outcome: Outcome, status: number, usage: { prompt_tokens: number; completion_tokens: number } | undefined, errorCode?: ErrorCode): void {
    this.unscheduled("cancelled");
    this.attemptEnded({ kind: "neutral" });
    this.continued("cancelled");
    const s = this.span;
    const attrs: Attributes = { "llmgw.outcome": outcome, "http.response.status_code": status };
    if (usage !== undefined) {
      attrs["gen_ai.usage.input_tokens"] = usage.prompt_tokens;
      attrs["gen_ai.usage.output_tokens"] = usage.completion_tokens;
    }
    if (this.responseModel !== undefined) attrs["gen_ai.response.model"] = this.responseModel;
    if (this.responseId !== undefined) attrs["gen_ai.response.id"] = this.responseId;
    if (this.finishReasons !== undefined) attrs["gen_ai.response.finish_reasons"] = this.finishReasons;
    s.setAttributes(attrs);
    if (errorCode !== undefined) {
      s.setAttribute("error.type", errorCode);
      s.setStatus({ code: SpanStatusCode.ERROR, message: errorCode });
    }
    s.end();
  }

  /** The answer's id and the model its engine names (the first answer's: a continuation keeps them). */
  private identity(json: unknown): void {
    if (typeof json !== "object" || json === null || this.responseId !== undefined) return;
    const a = json as Answer;
    const inner = a.response ?? a.message;
    const src = typeof inner === "object" && inner !== null ? inner : a;
    if (typeof src.id === "string") this.responseId = src.id;
    if (typeof src.model === "string") this.responseModel = src.model;
  }

  /** Each choice's finish_reason (chat, completions), or Anthropic's stop_reason (an answer's, or message_delta's). */
  private reasons(json: unknown): void {
    if (typeof json !== "object" || json === null) return;
    const a = json as Answer;
    if (Array.isArray(a.choices)) for (const c of a.choices) this.reason(c);
    const stop = a.delta?.stop_reason ?? a.stop_reason;
    if (typeof stop === "string") (this.finishReasons ??= []).push(stop);
  }

  private reason(choice: unknown): void {
    const r = typeof choice === "object" && choice !== null ? (choice as { finish_reason?: unknown }).finish_reason : undefined;
    if (typeof r === "string") (this.finishReasons ??= []).push(r);
  }
}
