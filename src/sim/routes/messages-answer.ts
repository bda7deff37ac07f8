/**
 * The sim-engine's Anthropic Messages API answers, as vLLM writes them
 * (vllm/entrypoints/anthropic/serving.py): the message object (id, type
 * "message", role "assistant", content blocks text or tool_use, stop_reason,
 * usage input_tokens/output_tokens), and the event stream — `event: <type>`
 * and `data: <json>` per event: message_start (usage with the prompt's
 * tokens), ping, content_block_start, one content_block_delta per token
 * (text_delta, or input_json_delta for a forced tool call),
 * content_block_stop, message_delta (stop_reason, usage), message_stop. A
 * stream whose connection is cut (fault cut:N) just stops, as vLLM's would.
 */
import type { ChoicePlan } from "../answer-plan.ts";
import { AnswerStream, CUT_AFTER_MS, InjectedCutError, type SinkOwner } from "../answer-stream.ts";
import type { SeqSink } from "../engine.ts";
import { SimOutput } from "../text-model.ts";
import type { GenerationAnswer } from "./run-sequences.ts";
import { argumentsText } from "./tool-calls.ts";

type Obj = Record<string, unknown>;

const enc = new TextEncoder();
const SSE_HEADERS = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" };

/** What both transports know of the request. */
export interface MessagesHead {
  id: string;
  model: string;
  promptTokens: number;
  plan: ChoicePlan;
}

/** vLLM's stop_reason_map over the chat finish_reason: stop → end_turn (stop_sequence when a stop string ended it), length → max_tokens, a call → tool_use. */
function stopReason(plan: ChoicePlan): string {
  if (plan.finishReason === "length") return "max_tokens";
  if (plan.tool) return "tool_use";
  return plan.stopReason !== null ? "stop_sequence" : "end_turn";
}

function toolInput(args: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    return {}; // arguments cut by max_tokens are not JSON
  }
}

function textOf(plan: ChoicePlan, tokens: number): string {
  return plan.texts ? plan.texts.slice(0, tokens).join("") : new SimOutput(plan.state).text(tokens);
}

function messageObject(h: MessagesHead, content: Obj[], stop: string | null, output: number): Obj {
  return {
    id: h.id,
    type: "message",
    role: "assistant",
    content,
    model: h.model,
    stop_reason: stop,
    stop_sequence: stop === "stop_sequence" ? h.plan.stopReason : null,
    usage: { input_tokens: h.promptTokens, output_tokens: output },
  };
}

function finalContent(plan: ChoicePlan, tokens: number): Obj[] {
  const t = plan.tool;
  if (t) return [{ type: "tool_use", id: t.id, name: t.name, input: toolInput(argumentsText(t, tokens)) }];
  return [{ type: "text", text: textOf(plan, tokens) }];
}

function event(type: string, body: Obj): Uint8Array {
  return enc.encode(`event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`);
}

/** The event stream of one message. */
export class MessagesSseAnswer extends AnswerStream implements GenerationAnswer {
  private generated = 0;
  private readonly output: SimOutput;

  constructor(
    private readonly h: MessagesHead,
    owner: SinkOwner,
  ) {
    super(owner);
    this.output = new SimOutput(h.plan.state);
  }

  respond(): Response {
    return new Response(this.stream, { headers: SSE_HEADERS });
  }

  sink(): SeqSink {
    return { token: (index, last) => this.token(index, last), finish: () => this.finish(), cut: () => this.cut() };
  }

  private opening(): Uint8Array[] {
    const t = this.h.plan.tool;
    const block = t ? { type: "tool_use", id: t.id, name: t.name, input: {} } : { type: "text", text: "" };
    return [
      event("message_start", { message: messageObject(this.h, [], null, 0) }),
      event("content_block_start", { index: 0, content_block: block }),
      event("ping", {}),
    ];
  }

  private token(index: number, last: boolean): void {
    if (!this.open) return;
    const out = index === 0 ? this.opening() : [];
    this.generated = index + 1;
    const p = this.h.plan;
    const delta = p.tool
      ? { type: "input_json_delta", partial_json: p.tool.pieces[index] ?? "" }
      : { type: "text_delta", text: p.texts ? (p.texts[index] ?? "") : this.output.tokenText(index) };
    out.push(event("content_block_delta", { index: 0, delta }));
    if (last) out.push(event("content_block_stop", { index: 0 }));
    this.send(out.length === 1 ? out[0]! : Buffer.concat(out));
  }

  private finish(): void {
    if (!this.open) return;
    const stop = stopReason(this.h.plan);
    const delta = { stop_reason: stop, stop_sequence: stop === "stop_sequence" ? this.h.plan.stopReason : null };
    const usage = { input_tokens: this.h.promptTokens, output_tokens: this.generated };
    this.end(Buffer.concat([event("message_delta", { delta, usage }), event("message_stop", {})]));
  }
}

/** A non-streaming message: resolves when the answer is finished (or cut). */
export class MessagesJsonAnswer implements GenerationAnswer {
  onCancel: () => void = () => {};
  private readonly response: Promise<Response>;
  private resolve: (r: Response) => void = () => {};
  private done = false;
  private generated = 0;

  constructor(
    private readonly h: MessagesHead,
    private readonly owner: SinkOwner,
  ) {
    this.response = new Promise((r) => (this.resolve = r));
  }

  respond(): Promise<Response> {
    return this.response;
  }

  sink(): SeqSink {
    return { token: (index) => void (this.generated = index + 1), finish: () => this.finish(), cut: () => this.cut() };
  }

  private finish(): void {
    if (this.done) return;
    const p = this.h.plan;
    this.end(Response.json(messageObject(this.h, finalContent(p, this.generated), stopReason(p), this.generated)));
  }

  private cut(): void {
    if (this.done) return;
    const body = new ReadableStream<Uint8Array>({
      start: (c) => {
        c.enqueue(enc.encode(`{"id":"${this.h.id}",`));
        setTimeout(() => c.error(new InjectedCutError()), CUT_AFTER_MS);
      },
    });
    this.end(new Response(body, { headers: { "content-type": "application/json" } }));
  }

  shutdown(): void {
    if (this.done) return;
    this.end(new Response(null, { status: 503 }));
  }

  private end(r: Response): void {
    this.done = true;
    this.resolve(r);
    this.owner.closed(this);
  }
}
