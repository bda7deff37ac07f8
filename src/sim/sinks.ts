/**
 * Transports for engine sequences: one HTTP answer (an SSE stream, or a
 * pending JSON response) fed by the sequences of its choices (n > 1 and
 * batched prompts give several). The engine loop feeds them directly.
 */
import type { ChoicePlan } from "./answer-plan.ts";
import { AnswerStream, type Closable, CUT_AFTER_MS, InjectedCutError, type SinkOwner } from "./answer-stream.ts";
import type { SeqSink } from "./engine.ts";
import { chatResponse, completionResponse, type FinishedChoice, StreamEncoder } from "./openai-response.ts";
import { argumentsText, toolCallDelta } from "./routes/tool-calls.ts";
import { SimOutput } from "./text-model.ts";

/** What both transports know of the request. */
interface AnswerHead {
  kind: "chat" | "completion";
  id: string;
  created: number;
  model: string;
  /** Prompt tokens over every prompt of the request (usage counts them once). */
  promptTokens: number;
  /** Report usage.prompt_tokens_details (--enable-prompt-tokens-details). */
  promptTokensDetails: boolean;
}

/**
 * The cached tokens usage reports, when it reports them: vLLM's serving
 * code reads num_cached_tokens off one output — a chat's, a completion's
 * last prompt's — and sets prompt_tokens_details only when the flag is on
 * and that number is not 0 (serving_chat.py, serving_completion.py).
 */
function reportedCached(head: AnswerHead, plans: readonly ChoicePlan[], cached: readonly number[]): number | undefined {
  if (!head.promptTokensDetails) return undefined;
  const lastPrompt = plans[plans.length - 1]!.prompt;
  const n = cached[plans.findIndex((p) => p.prompt === lastPrompt)] ?? 0;
  return n > 0 ? n : undefined;
}

/** A tool call's finish_reason: its own ("tool_calls" or "stop"), or "length" when max_tokens cut its arguments. */
function toolFinish(plan: ChoicePlan): "tool_calls" | "stop" | "length" {
  return plan.finishReason === "length" ? "length" : plan.tool!.finish;
}

/** The visible text of a choice's first `n` tokens. */
function choiceText(plan: ChoicePlan, output: SimOutput, n: number): string {
  return plan.texts ? plan.texts.slice(0, n).join("") : output.text(n);
}

export class SseSink extends AnswerStream {
  private rolesSent = false;
  private left: number;
  private readonly generated: number[];
  private readonly cached: number[];
  private readonly encoders: StreamEncoder[];

  constructor(
    private readonly head: AnswerHead,
    private readonly plans: readonly ChoicePlan[],
    includeUsage: boolean,
    owner: SinkOwner,
  ) {
    super(owner);
    this.encoders = plans.map((p) => new StreamEncoder(head.kind, head.id, head.created, head.model, includeUsage, new SimOutput(p.state), p.index));
    this.left = plans.length;
    this.generated = plans.map(() => 0);
    this.cached = plans.map(() => 0);
  }

  /** The engine-facing sink of choice `k`. */
  sink(k: number): SeqSink {
    return {
      token: (index, last) => this.token(k, index, last),
      finish: (_reason, cached) => {
        this.cached[k] = cached;
        this.finishChoice();
      },
      cut: () => this.cut(),
    };
  }

  private token(k: number, index: number, last: boolean): void {
    if (!this.open) return;
    this.generated[k] = index + 1;
    const plan = this.plans[k]!;
    const enc = this.encoders[k]!;
    const finish = last ? plan.finishReason : null;
    const chunk = plan.tool
      ? enc.delta(toolCallDelta(plan.tool, index), last ? toolFinish(plan) : null)
      : plan.texts || (last && plan.stopReason !== null)
        ? enc.tokenText(plan.texts?.[index] ?? "", finish, last ? plan.stopReason : null)
        : enc.token(index, finish);
    if (!this.rolesSent && this.head.kind === "chat") {
      // vLLM's first iteration sends the role chunk of every choice (serving_chat.py).
      this.rolesSent = true;
      this.send(StreamEncoder.concat([...this.encoders.map((e) => e.role()), chunk]));
    } else this.send(chunk);
  }

  private finishChoice(): void {
    if (!this.open || --this.left > 0) return;
    this.end(
      this.encoders[0]!.end(
        this.head.promptTokens,
        this.generated.reduce((a, b) => a + b, 0),
        reportedCached(this.head, this.plans, this.cached),
      ),
    );
  }
}

/** A non-streaming request: resolves its Response when every choice has finished (or one is cut). */
export class JsonSink implements Closable {
  readonly response: Promise<Response>;
  private resolve: (r: Response) => void = () => {};
  private done = false;
  private left: number;
  private readonly generated: number[];
  private readonly cached: number[];

  constructor(
    private readonly head: AnswerHead,
    private readonly plans: readonly ChoicePlan[],
    private readonly owner: SinkOwner,
  ) {
    this.response = new Promise((r) => (this.resolve = r));
    this.left = plans.length;
    this.generated = plans.map(() => 0);
    this.cached = plans.map(() => 0);
  }

  sink(k: number): SeqSink {
    return {
      token: (index) => void (this.generated[k] = index + 1),
      finish: (_reason, cached) => {
        this.cached[k] = cached;
        this.finishChoice();
      },
      cut: () => this.cut(),
    };
  }

  private finishChoice(): void {
    if (this.done || --this.left > 0) return;
    const choices: FinishedChoice[] = this.plans.map((p, k) => {
      const n = this.generated[k]!;
      const toolCall = p.tool && { id: p.tool.id, name: p.tool.name, arguments: argumentsText(p.tool, n) };
      if (toolCall) return { index: p.index, text: "", finish: toolFinish(p), stopReason: null, tokens: n, toolCall };
      return { index: p.index, text: choiceText(p, new SimOutput(p.state), n), finish: p.finishReason, stopReason: p.stopReason, tokens: n };
    });
    const make = this.head.kind === "chat" ? chatResponse : completionResponse;
    const body = make(this.head.id, this.head.created, this.head.model, choices, this.head.promptTokens, reportedCached(this.head, this.plans, this.cached));
    this.end(new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } }));
  }

  cut(): void {
    if (this.done) return;
    // Headers and the start of the JSON, then the connection breaks.
    const head = new TextEncoder().encode(`{"id":"${this.head.id}",`);
    const body = new ReadableStream<Uint8Array>({
      start: (c) => {
        c.enqueue(head);
        setTimeout(() => c.error(new InjectedCutError()), CUT_AFTER_MS);
      },
    });
    this.end(new Response(body, { headers: { "content-type": "application/json" } }));
  }

  /** The client left (or shutdown): settle the pending promise with something Bun can drop. */
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
