/**
 * POST /v1/audio/transcriptions on the sim-engine, with vLLM's shapes
 * (serving_transcription.py, TranscriptionRequest/TranscriptionResponse):
 * a multipart form with `file` and `model` (and `language`, `prompt`,
 * `response_format` json or text, `stream`, `stream_include_usage`). The
 * audio is "decoded" on the engine's clock: its length (16 kHz 16-bit mono,
 * 32,000 bytes a second) gives the encoder's prompt (50 tokens a second, as
 * Whisper's), the text is the sim's words, generated token by token. The
 * answer is `{"text", "usage": {"type": "duration", "seconds"}}`, or with
 * stream=true vLLM's `transcription.chunk` events then [DONE].
 */
import { planChoices } from "../answer-plan.ts";
import { AnswerStream, CUT_AFTER_MS, InjectedCutError, type SinkOwner } from "../answer-stream.ts";
import type { SeqSink } from "../engine.ts";
import { DONE_BYTES, randomId } from "../openai-response.ts";
import { extendState, SimOutput, seedState } from "../text-model.ts";
import type { PromptTokens } from "../tokens.ts";
import { badRequest, SimHttpError } from "../vllm-errors.ts";
import type { BunServer, SimRouteContext } from "./route-context.ts";
import { type GenerationAnswer, runGeneration } from "./run-sequences.ts";

const enc = new TextEncoder();
/** 16 kHz, 16-bit, mono PCM: what Whisper resamples every input to. */
const AUDIO_BYTES_PER_SECOND = 32_000;
/** Whisper's encoder: 1,500 positions for 30 s. */
const AUDIO_TOKENS_PER_SECOND = 50;

interface TranscriptionHead {
  id: string;
  created: number;
  model: string;
  seconds: number;
  promptTokens: number;
  output: SimOutput;
  includeUsage: boolean;
  format: "json" | "text";
}

type Form = Awaited<ReturnType<Request["formData"]>>;

function field(form: Form, name: string): string | undefined {
  const v = form.get(name);
  return typeof v === "string" ? v : undefined;
}

export async function transcriptionsRoute(ctx: SimRouteContext, req: Request, server: BunServer): Promise<Response> {
  ctx.counted();
  const blocked = ctx.notReady();
  if (blocked) return blocked;
  let form: Form;
  try {
    form = await req.formData();
  } catch (err) {
    throw badRequest(`the request body must be multipart/form-data: ${err instanceof Error ? err.message : String(err)}`);
  }
  const file = form.get("file");
  if (file === null || typeof file === "string") throw new SimHttpError(400, "BadRequestError", "file: Field required (an audio file)", "file");
  const model = field(form, "model");
  if (model === undefined) throw badRequest("model: Field required", "model");
  if (!ctx.limits.models.includes(model)) throw new SimHttpError(404, "NotFoundError", `The model \`${model}\` does not exist.`, "model");
  const format = field(form, "response_format") ?? "json";
  if (format !== "json" && format !== "text") throw badRequest(`response_format: the sim-engine answers json or text, got '${format}'`, "response_format");
  const stream = field(form, "stream") === "true";
  const includeUsage = field(form, "stream_include_usage") === "true";
  if (includeUsage && !stream) throw badRequest("Stream options can only be defined when `stream=True`.", "stream_include_usage");
  const bytes = new Uint8Array(await file.arrayBuffer());
  const seconds = Math.max(1, Math.ceil(bytes.length / AUDIO_BYTES_PER_SECOND));
  const count = seconds * AUDIO_TOKENS_PER_SECOND;
  if (count >= ctx.limits.maxModelLen)
    throw badRequest(`The audio is ${seconds} s long, more than this model's context of ${ctx.limits.maxModelLen} tokens holds.`, "file");
  // The text follows from the audio (and the prompt): the same file transcribes the same way.
  const state = extendState(extendState(seedState(undefined), String(Bun.hash(bytes))), field(form, "prompt") ?? "");
  const prompt: PromptTokens = { count, ids: new Int32Array(0), blockHashes: [], state, continued: 0, baseState: state };
  const plan = planChoices([prompt], { maxTokens: undefined, ignoreEos: false, minTokens: 0, stop: [], includeStopStr: false, n: 1 }, ctx.limits)[0]!;
  const head: TranscriptionHead = {
    id: randomId("trsc-"),
    created: Math.floor(Date.now() / 1000),
    model,
    seconds,
    promptTokens: count,
    output: new SimOutput(state),
    includeUsage,
    format,
  };
  return runGeneration(ctx, req, server, [plan], stream, (streaming) =>
    streaming ? new TranscriptionStream(head, ctx.owner) : new TranscriptionJson(head, ctx.owner),
  );
}

/** vLLM's transcription stream: one transcription.chunk per token, the last with finish_reason, the usage chunk if asked, [DONE]. */
class TranscriptionStream extends AnswerStream implements GenerationAnswer {
  private generated = 0;

  constructor(
    private readonly h: TranscriptionHead,
    owner: SinkOwner,
  ) {
    super(owner);
  }

  respond(): Response {
    return new Response(this.stream, { headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" } });
  }

  sink(): SeqSink {
    return {
      token: (index, last) => {
        if (!this.open) return;
        this.generated = index + 1;
        const choice = { delta: { content: this.h.output.tokenText(index) }, finish_reason: last ? "stop" : null, stop_reason: null };
        this.send(this.chunk({ choices: [choice] }));
      },
      finish: () => {
        if (!this.open) return;
        if (this.h.includeUsage) {
          const usage = { prompt_tokens: this.h.promptTokens, total_tokens: this.h.promptTokens + this.generated, completion_tokens: this.generated };
          this.send(this.chunk({ choices: [], usage }));
        }
        this.end(DONE_BYTES);
      },
      cut: () => this.cut(),
    };
  }

  private chunk(rest: Record<string, unknown>): Uint8Array {
    const { id, created, model } = this.h;
    return enc.encode(`data: ${JSON.stringify({ id, object: "transcription.chunk", created, model, ...rest })}\n\n`);
  }
}

/** The whole transcription at the end: JSON with usage, or the text alone (response_format text). */
class TranscriptionJson implements GenerationAnswer {
  onCancel: () => void = () => {};
  private readonly response: Promise<Response>;
  private resolve: (r: Response) => void = () => {};
  private done = false;
  private generated = 0;

  constructor(
    private readonly h: TranscriptionHead,
    private readonly owner: SinkOwner,
  ) {
    this.response = new Promise((r) => (this.resolve = r));
  }

  respond(): Promise<Response> {
    return this.response;
  }

  sink(): SeqSink {
    return {
      token: (index) => void (this.generated = index + 1),
      finish: () => {
        const text = this.h.output.text(this.generated);
        this.end(
          this.h.format === "text"
            ? new Response(text, { headers: { "content-type": "text/plain; charset=utf-8" } })
            : Response.json({ text, usage: { type: "duration", seconds: this.h.seconds } }),
        );
      },
      cut: () => {
        const body = new ReadableStream<Uint8Array>({
          start: (c) => {
            c.enqueue(enc.encode('{"text":"'));
            setTimeout(() => c.error(new InjectedCutError()), CUT_AFTER_MS);
          },
        });
        this.end(new Response(body, { headers: { "content-type": "application/json" } }));
      },
    };
  }

  shutdown(): void {
    this.end(new Response(null, { status: 503 }));
  }

  private end(r: Response): void {
    if (this.done) return;
    this.done = true;
    this.resolve(r);
    this.owner.closed(this);
  }
}
