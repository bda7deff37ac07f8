/**
 * The sim-engine's Responses API answers, as vLLM writes them
 * (serving_responses.py, simple_streaming_events.py, api_router.py): the
 * response object (ResponsesResponse.from_request), and the event stream —
 * `event: <type>` and `data: <json>` per event, numbered by
 * sequence_number, no [DONE]: response.created, response.in_progress, then
 * for text output_item.added, content_part.added, one
 * response.output_text.delta per token, output_text.done,
 * content_part.done, output_item.done — for a forced tool call
 * output_item.added (a function_call item), one
 * response.function_call_arguments.delta per token,
 * function_call_arguments.done, output_item.done — and
 * response.completed with the final response and its usage. A stream whose
 * connection is cut (fault cut:N) just stops, as vLLM's would.
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
export interface ResponsesHead {
  id: string;
  createdAt: number;
  model: string;
  promptTokens: number;
  echo: Obj;
  plan: ChoicePlan;
}

/** vLLM's ResponseUsage: cached_tokens is the request's num_cached_tokens, reported whatever the flags (serving_responses.py). */
function usage(prompt: number, output: number, cached: number): Obj {
  return {
    input_tokens: prompt,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0, tool_output_tokens: 0 },
    total_tokens: prompt + output,
  };
}

/** ResponsesResponse.from_request, field for field. */
function responseObject(h: ResponsesHead, status: string, output: Obj[], tokens: number | undefined, cached = 0): Obj {
  const e = h.echo;
  return {
    id: h.id,
    created_at: h.createdAt,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: e.instructions,
    metadata: e.metadata,
    model: h.model,
    object: "response",
    output,
    parallel_tool_calls: e.parallel_tool_calls,
    temperature: e.temperature,
    tool_choice: e.tool_choice,
    tools: e.tools,
    top_p: e.top_p,
    background: e.background,
    max_output_tokens: e.max_output_tokens,
    max_tool_calls: e.max_tool_calls,
    previous_response_id: e.previous_response_id,
    prompt: e.prompt,
    reasoning: e.reasoning,
    service_tier: e.service_tier,
    status,
    text: e.text,
    top_logprobs: e.top_logprobs,
    truncation: e.truncation,
    usage: tokens === undefined ? null : usage(h.promptTokens, tokens, cached),
    user: e.user,
    input_messages: null,
    output_messages: null,
  };
}

function messageItem(id: string, text: string, status: string): Obj {
  return {
    id,
    content: status === "in_progress" ? [] : [{ annotations: [], text, type: "output_text", logprobs: null }],
    role: "assistant",
    status,
    type: "message",
  };
}

function callItem(plan: ChoicePlan, args: string, status: string): Obj {
  const t = plan.tool!;
  return { arguments: args, call_id: `call_${t.id.slice("chatcmpl-tool-".length)}`, name: t.name, type: "function_call", id: t.itemId, status };
}

/** The output items of an answer of `tokens` tokens, finished. */
function finalOutput(h: ResponsesHead, itemId: string, tokens: number): Obj[] {
  const p = h.plan;
  if (p.tool) return [callItem(p, argumentsText(p.tool, tokens), "completed")];
  return [messageItem(itemId, new SimOutput(p.state).text(tokens), "completed")];
}

/** "incomplete" when max_output_tokens cut the answer (vLLM: finish_reason "length"). */
function statusOf(plan: ChoicePlan): string {
  return plan.finishReason === "length" ? "incomplete" : "completed";
}

/** The event stream of one response. */
export class ResponsesSseAnswer extends AnswerStream implements GenerationAnswer {
  private seq = 0;
  private text = "";
  private generated = 0;
  private readonly itemId = `msg_${crypto.randomUUID().replaceAll("-", "")}`;
  private readonly output: SimOutput;

  constructor(
    private readonly h: ResponsesHead,
    owner: SinkOwner,
  ) {
    super(owner);
    this.output = new SimOutput(h.plan.state);
  }

  respond(): Response {
    return new Response(this.stream, { headers: SSE_HEADERS });
  }

  sink(): SeqSink {
    return { token: (index, last) => this.token(index, last), finish: (_reason, cached) => this.finish(cached), cut: () => this.cut() };
  }

  private event(type: string, body: Obj): Uint8Array {
    const data = JSON.stringify({ ...body, sequence_number: this.seq++, type });
    return enc.encode(`event: ${type}\ndata: ${data}\n\n`);
  }

  private opening(): Uint8Array[] {
    const initial = responseObject(this.h, "in_progress", [], undefined);
    const out = [this.event("response.created", { response: initial }), this.event("response.in_progress", { response: initial })];
    const p = this.h.plan;
    if (p.tool) out.push(this.event("response.output_item.added", { item: callItem(p, "", "in_progress"), output_index: 0 }));
    else {
      out.push(this.event("response.output_item.added", { item: messageItem(this.itemId, "", "in_progress"), output_index: 0 }));
      out.push(
        this.event("response.content_part.added", {
          content_index: 0,
          item_id: this.itemId,
          output_index: 0,
          part: { annotations: [], text: "", type: "output_text", logprobs: [] },
        }),
      );
    }
    return out;
  }

  private token(index: number, last: boolean): void {
    if (!this.open) return;
    const out = index === 0 ? this.opening() : [];
    this.generated = index + 1;
    const p = this.h.plan;
    if (p.tool) out.push(this.event("response.function_call_arguments.delta", { delta: p.tool.pieces[index] ?? "", item_id: p.tool.itemId, output_index: 0 }));
    else {
      const delta = this.output.tokenText(index);
      this.text += delta;
      out.push(this.event("response.output_text.delta", { content_index: 0, delta, item_id: this.itemId, logprobs: [], output_index: 0 }));
    }
    if (last) out.push(...this.closing());
    this.send(out.length === 1 ? out[0]! : Buffer.concat(out));
  }

  private closing(): Uint8Array[] {
    const p = this.h.plan;
    if (p.tool) {
      const args = argumentsText(p.tool, this.generated);
      return [
        this.event("response.function_call_arguments.done", { arguments: args, item_id: p.tool.itemId, name: p.tool.name, output_index: 0 }),
        this.event("response.output_item.done", { item: callItem(p, args, "completed"), output_index: 0 }),
      ];
    }
    const part = { annotations: [], text: this.text, type: "output_text", logprobs: null };
    return [
      this.event("response.output_text.done", { content_index: 0, item_id: this.itemId, logprobs: [], output_index: 0, text: this.text }),
      this.event("response.content_part.done", { content_index: 0, item_id: this.itemId, output_index: 0, part }),
      this.event("response.output_item.done", { item: messageItem(this.itemId, this.text, "completed"), output_index: 0 }),
    ];
  }

  private finish(cached: number): void {
    if (!this.open) return;
    const final = responseObject(this.h, statusOf(this.h.plan), finalOutput(this.h, this.itemId, this.generated), this.generated, cached);
    this.end(this.event("response.completed", { response: final }));
  }
}

/** A non-streaming response: resolves when the answer is finished (or cut). */
export class ResponsesJsonAnswer implements GenerationAnswer {
  onCancel: () => void = () => {};
  private readonly response: Promise<Response>;
  private resolve: (r: Response) => void = () => {};
  private done = false;
  private generated = 0;

  constructor(
    private readonly h: ResponsesHead,
    private readonly owner: SinkOwner,
  ) {
    this.response = new Promise((r) => (this.resolve = r));
  }

  respond(): Promise<Response> {
    return this.response;
  }

  sink(): SeqSink {
    return { token: (index) => void (this.generated = index + 1), finish: (_reason, cached) => this.finish(cached), cut: () => this.cut() };
  }

  private finish(cached: number): void {
    if (this.done) return;
    const itemId = `msg_${crypto.randomUUID().replaceAll("-", "")}`;
    const body = responseObject(this.h, statusOf(this.h.plan), finalOutput(this.h, itemId, this.generated), this.generated, cached);
    this.end(Response.json(body));
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
