/**
 * The bytes and objects the sim-engine answers with, field for field as
 * vLLM's serving_chat.py / serving_completion.py write them. Streaming
 * chunks are assembled from pre-encoded pieces (a per-request head plus a
 * per-token tail from a table), so a token costs one small allocation and no
 * JSON.stringify.
 */
import { type SimOutput, VOCAB } from "./text-model.ts";

const enc = new TextEncoder();

function concat(parts: readonly Uint8Array[]): Uint8Array {
  return Buffer.concat(parts);
}

export const DONE_BYTES = enc.encode("data: [DONE]\n\n");
/** An SSE comment: makes Bun send the response headers without sending an event. */
export const SSE_COMMENT_BYTES = enc.encode(": \n\n");

type Kind = "chat" | "completion";
type Finish = "stop" | "length";

/** Per-token tails, by [kind][usageNull][finish: 0 none, 1 stop, 2 length][vocab index]. */
function buildTails(kind: Kind, usageNull: boolean): Uint8Array[][] {
  const u = usageNull ? ',"usage":null' : "";
  const finishes = ["null", '"stop"', '"length"'];
  return finishes.map((f, fi) =>
    VOCAB.map((w) => {
      const stop = fi === 0 ? "" : ',"stop_reason":null';
      const body =
        kind === "chat"
          ? `{"content":"${w}"},"logprobs":null,"finish_reason":${f}${stop}}]${u}}\n\n`
          : `${w}","logprobs":null,"finish_reason":${f},"stop_reason":null}]${u}}\n\n`;
      return enc.encode(body);
    }),
  );
}

const TAILS: Record<Kind, [Uint8Array[][], Uint8Array[][]]> = {
  chat: [buildTails("chat", false), buildTails("chat", true)],
  completion: [buildTails("completion", false), buildTails("completion", true)],
};

/** Encodes one choice's SSE events (choice `index` of its request). */
export class StreamEncoder {
  private readonly head: Uint8Array;
  private readonly tails: Uint8Array[][];
  private readonly envelope: string;
  private readonly headText: string;

  constructor(
    private readonly kind: Kind,
    readonly id: string,
    readonly created: number,
    readonly model: string,
    private readonly includeUsage: boolean,
    private readonly output: SimOutput,
    readonly index = 0,
  ) {
    const object = kind === "chat" ? "chat.completion.chunk" : "text_completion";
    this.envelope = `{"id":"${id}","object":"${object}","created":${created},"model":${JSON.stringify(model)}`;
    this.headText = `data: ${this.envelope},"choices":[{"index":${index},`;
    this.head = enc.encode(this.headText + (kind === "chat" ? '"delta":' : '"text":"'));
    this.tails = TAILS[kind][includeUsage ? 1 : 0];
  }

  /** The chat stream's opening event: the assistant role with empty content. */
  role(): Uint8Array {
    const u = this.includeUsage ? ',"usage":null' : "";
    return concat([this.head, enc.encode(`{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]${u}}\n\n`)]);
  }

  /** The event for token `index`; the last one carries the finish reason. */
  token(index: number, finish: Finish | null): Uint8Array {
    const tail = this.tails[finish === null ? 0 : finish === "stop" ? 1 : 2]![this.output.tokenIndex(index)]!;
    const out = new Uint8Array(this.head.length + tail.length);
    out.set(this.head, 0);
    out.set(tail, this.head.length);
    return out;
  }

  /** A token whose visible text is not its own word (stop strings hold text back and cut it), or whose stop_reason is a string. */
  tokenText(text: string, finish: Finish | null, stopReason: string | null): Uint8Array {
    const u = this.includeUsage ? ',"usage":null' : "";
    const f = finish === null ? "null" : `"${finish}"`;
    const sr = `,"stop_reason":${JSON.stringify(stopReason)}`;
    const body =
      this.kind === "chat"
        ? `"delta":{"content":${JSON.stringify(text)}},"logprobs":null,"finish_reason":${f}${finish === null ? "" : sr}}]${u}}\n\n`
        : `"text":${JSON.stringify(text)},"logprobs":null,"finish_reason":${f}${sr}}]${u}}\n\n`;
    return enc.encode(this.headText + body);
  }

  /** A chat chunk with `delta` (a JSON object's text) and a finish reason (a tool call's, which is not a token's word). */
  delta(delta: string, finish: string | null): Uint8Array {
    const u = this.includeUsage ? ',"usage":null' : "";
    const f = finish === null ? "null" : `"${finish}","stop_reason":null`;
    return enc.encode(`${this.headText}"delta":${delta},"logprobs":null,"finish_reason":${f}}]${u}}\n\n`);
  }

  /** The closing events: the usage chunk (when asked for; prompt_tokens_details only with `cachedTokens`) and [DONE]. */
  end(promptTokens: number, completionTokens: number, cachedTokens?: number): Uint8Array {
    if (!this.includeUsage) return DONE_BYTES;
    const details = cachedTokens === undefined ? "" : `,"prompt_tokens_details":{"cached_tokens":${cachedTokens}}`;
    const usage = `{"prompt_tokens":${promptTokens},"total_tokens":${promptTokens + completionTokens},"completion_tokens":${completionTokens}${details}}`;
    return concat([enc.encode(`data: ${this.envelope},"choices":[],"usage":${usage}}\n\n`), DONE_BYTES]);
  }

  static concat = concat;
}

export function randomId(prefix: string): string {
  return `${prefix}${crypto.randomUUID().replaceAll("-", "")}`;
}

function usageObject(prompt: number, completion: number, cachedTokens?: number): Record<string, unknown> {
  const details = cachedTokens === undefined ? null : { cached_tokens: cachedTokens };
  return { prompt_tokens: prompt, total_tokens: prompt + completion, completion_tokens: completion, prompt_tokens_details: details };
}

/** One finished choice of a non-streaming answer. */
export interface FinishedChoice {
  index: number;
  text: string;
  finish: Finish | "tool_calls";
  stopReason: string | null;
  tokens: number;
  /** A forced tool call instead of text (routes/tool-calls.ts). */
  toolCall?: { id: string; name: string; arguments: string };
}

/** vLLM's ChatMessage: text, or (content "") the tool call it made. */
function chatMessage(c: FinishedChoice): Record<string, unknown> {
  const t = c.toolCall;
  const toolCalls = t === undefined ? [] : [{ id: t.id, type: "function", function: { name: t.name, arguments: t.arguments } }];
  return {
    role: "assistant",
    content: t === undefined ? c.text : "",
    refusal: null,
    annotations: null,
    audio: null,
    function_call: null,
    tool_calls: toolCalls,
    reasoning_content: null,
  };
}

/** vLLM's non-streaming ChatCompletionResponse. */
export function chatResponse(
  id: string,
  created: number,
  model: string,
  choices: readonly FinishedChoice[],
  promptTokens: number,
  cachedTokens?: number,
): Record<string, unknown> {
  return {
    id,
    object: "chat.completion",
    created,
    model,
    choices: choices.map((c) => ({
      index: c.index,
      message: chatMessage(c),
      logprobs: null,
      finish_reason: c.finish,
      stop_reason: c.stopReason,
    })),
    service_tier: null,
    system_fingerprint: null,
    usage: usageObject(
      promptTokens,
      choices.reduce((a, c) => a + c.tokens, 0),
      cachedTokens,
    ),
    prompt_logprobs: null,
    kv_transfer_params: null,
  };
}

/** vLLM's non-streaming CompletionResponse. */
export function completionResponse(
  id: string,
  created: number,
  model: string,
  choices: readonly FinishedChoice[],
  promptTokens: number,
  cachedTokens?: number,
): Record<string, unknown> {
  return {
    id,
    object: "text_completion",
    created,
    model,
    choices: choices.map((c) => ({ index: c.index, text: c.text, logprobs: null, finish_reason: c.finish, stop_reason: c.stopReason, prompt_logprobs: null })),
    usage: usageObject(
      promptTokens,
      choices.reduce((a, c) => a + c.tokens, 0),
      cachedTokens,
    ),
    kv_transfer_params: null,
  };
}

/** A unit vector seeded from the text (same text → same vector), from a small xorshift generator. */
export function embeddingVector(text: string, dim: number): number[] {
  let x = Number(BigInt.asUintN(32, BigInt(Bun.hash(text)))) || 0x9e3779b9;
  const v = new Array<number>(dim);
  let norm = 0;
  for (let i = 0; i < dim; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    const f = x / 0x100000000 - 0.5;
    v[i] = f;
    norm += f * f;
  }
  const scale = norm > 0 ? 1 / Math.sqrt(norm) : 0;
  for (let i = 0; i < dim; i++) v[i] = v[i]! * scale;
  return v;
}

export function embeddingResponse(model: string, created: number, inputs: readonly { text: string; tokens: number }[], dim: number): Record<string, unknown> {
  const tokens = inputs.reduce((a, b) => a + b.tokens, 0);
  return {
    id: randomId("embd-"),
    object: "list",
    created,
    model,
    data: inputs.map((it, index) => ({ index, object: "embedding", embedding: embeddingVector(it.text, dim) })),
    usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0, prompt_tokens_details: null },
  };
}

/** An adapter as vLLM lists it: `root` its path, `parent` the model it adapts, no max_model_len (vllm/entrypoints/openai/serving_models.py). */
export interface AdapterCard {
  id: string;
  root: string;
  parent: string;
}

/** vLLM's GET /v1/models list: the served names, then the LoRA adapters. */
export function modelsResponse(
  models: readonly string[],
  created: number,
  maxModelLen: number,
  adapters: readonly AdapterCard[] = [],
): Record<string, unknown> {
  return {
    object: "list",
    data: [...models.map((id) => modelCard(id, id, null, maxModelLen, created)), ...adapters.map((a) => modelCard(a.id, a.root, a.parent, null, created))],
  };
}

function modelCard(id: string, root: string, parent: string | null, maxModelLen: number | null, created: number): Record<string, unknown> {
  return {
    id,
    object: "model",
    created,
    owned_by: "vllm",
    root,
    parent,
    max_model_len: maxModelLen,
    permission: [
      {
        id: randomId("modelperm-"),
        object: "model_permission",
        created,
        allow_create_engine: false,
        allow_sampling: true,
        allow_logprobs: true,
        allow_search_indices: false,
        allow_view: true,
        allow_fine_tuning: false,
        organization: "*",
        group: null,
        is_blocking: false,
      },
    ],
  };
}
