/**
 * Step 1 of a request: read the body under a size limit, parse JSON, check
 * the fields the gateway relies on, and compute the prompt-prefix hashes for
 * affinity. Every failure is an OpenAI-shaped 400/404/413.
 */

import type { Route } from "../../metrics/names.ts";
import { type BodyDeadlines, readBodyBytes, readBodyChunks } from "../../shared/bounded-body.ts";
import { LlmgwError } from "../../shared/errors.ts";

export interface InferenceBody {
  model: string;
  stream?: boolean;
  stream_options?: { include_usage?: boolean } | null;
  [key: string]: unknown;
}

/**
 * What parsing yields, fixed from then on: every stage after the parse step
 * takes it, so none needs to ask whether the body or the model is known. A
 * Responses follow-up's expansion makes a new one rather than changing it.
 */
export interface ParsedRequest {
  /** The canonical model (alias resolved). */
  readonly model: string;
  readonly body: Readonly<InferenceBody>;
  /** The client's bytes, forwarded unchanged when nothing must change. */
  readonly rawBody: Uint8Array;
  /** The body's media type, sent to the engine as is (a transcription's multipart form with its boundary). */
  readonly contentType: string;
  readonly stream: boolean;
  /** The client asked for stream_options.include_usage. */
  readonly includeUsage: boolean;
  /** Choices the answer has (the request's n). */
  readonly choices: number;
  /** The request offered tools (and did not turn them off with tool_choice "none"): the answer's tool calls are counted. */
  readonly offersTools: boolean;
}

/** The parsed request of `body` (its bytes `rawBody`) for the canonical `model`. */
export function parsedRequest(body: InferenceBody, rawBody: Uint8Array, model: string, contentType = "application/json"): ParsedRequest {
  return Object.freeze({
    model,
    body,
    rawBody,
    contentType,
    stream: body.stream === true,
    includeUsage: body.stream_options?.include_usage === true,
    choices: typeof body.n === "number" ? body.n : 1,
    offersTools: Array.isArray(body.tools) && body.tools.length > 0 && body.tool_choice !== "none",
  });
}

/**
 * Read at most `limit` bytes under the body deadlines every route shares
 * (bounded-body.ts): a larger body is a 413 whether or not it declared its
 * length; one that pauses or drips is cut with a 408 and `connection: close`.
 * `watch.hold` is told the bytes the body will hold (its declared length at
 * once, then what has arrived) and refuses by throwing: a transcription's
 * form counts against the memory budget uploads share. `watch.chunk` sees
 * each chunk as it arrives (a form parsed on the way).
 */
export async function readBodyLimited(
  req: Request,
  limit: number,
  deadlines: BodyDeadlines,
  watch: { hold?: (bytes: number) => void; chunk?: (chunk: Uint8Array) => void } = {},
): Promise<Uint8Array> {
  const { hold } = watch;
  if (hold === undefined && watch.chunk === undefined) return readBodyBytes(req, limit, () => tooLarge(limit), deadlines);
  const declared = Number(req.headers.get("content-length") ?? NaN);
  // Before a byte is read: a form that cannot fit is refused at once rather than half-read (an oversized one is a 413, below).
  if (hold !== undefined && declared <= limit) hold(declared);
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of readBodyChunks(req, limit, () => tooLarge(limit), deadlines)) {
    total += chunk.byteLength;
    hold?.(total);
    watch.chunk?.(chunk);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total);
}

function tooLarge(limit: number): LlmgwError {
  return new LlmgwError("BODY_TOO_LARGE", `request body exceeds the limit of ${limit} bytes`);
}

const decoder = new TextDecoder("utf-8", { fatal: true });

export function parseInferenceBody(bytes: Uint8Array, route: Route): InferenceBody {
  let text: string;
  let body: unknown;
  try {
    text = decoder.decode(bytes);
    body = JSON.parse(text);
  } catch (err) {
    throw new LlmgwError("INVALID_JSON", `request body is not valid JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new LlmgwError("INVALID_REQUEST", "request body must be a JSON object");
  }
  const b = body as Record<string, unknown>;
  if (typeof b.model !== "string" || b.model.length === 0) {
    throw new LlmgwError("INVALID_REQUEST", "you must provide a model parameter", { param: "model" });
  }
  if (b.stream !== undefined && b.stream !== null && typeof b.stream !== "boolean") {
    throw new LlmgwError("INVALID_REQUEST", "'stream' must be a boolean", { param: "stream" });
  }
  if (b.stream_options !== undefined && b.stream_options !== null && (typeof b.stream_options !== "object" || Array.isArray(b.stream_options))) {
    throw new LlmgwError("INVALID_REQUEST", "'stream_options' must be an object", { param: "stream_options" });
  }
  switch (route) {
    case "chat":
      if (!Array.isArray(b.messages) || b.messages.length === 0) {
        throw new LlmgwError("INVALID_REQUEST", "'messages' must be a non-empty array", { param: "messages" });
      }
      break;
    case "completions":
      if (typeof b.prompt !== "string" && !Array.isArray(b.prompt)) {
        throw new LlmgwError("INVALID_REQUEST", "'prompt' must be a string or an array", { param: "prompt" });
      }
      break;
    case "embeddings":
      if (typeof b.input !== "string" && !Array.isArray(b.input)) {
        throw new LlmgwError("INVALID_REQUEST", "'input' must be a string or an array", { param: "input" });
      }
      if (b.stream === true) throw new LlmgwError("INVALID_REQUEST", "embeddings cannot stream", { param: "stream" });
      break;
    case "transcriptions":
      break; // a multipart form: multipart-fields.ts reads its fields
    default:
      checkOtherRoute(b, route);
  }
  for (const key of ["max_tokens", "max_completion_tokens", "max_output_tokens", "n"] as const) {
    const v = b[key];
    if (v !== undefined && v !== null && (typeof v !== "number" || !Number.isInteger(v) || v < 1)) {
      throw new LlmgwError("INVALID_REQUEST", `'${key}' must be a positive integer`, { param: key });
    }
  }
  return b as InferenceBody;
}

function optionalType(b: Record<string, unknown>, key: string, type: "boolean" | "string"): void {
  const v = b[key];
  if (v !== undefined && v !== null && typeof v !== type) throw new LlmgwError("INVALID_REQUEST", `'${key}' must be a ${type}`, { param: key });
}

/** The fields the gateway relies on for the Responses API and the rest of vLLM's routes; the engine validates the others. */
function checkOtherRoute(b: Record<string, unknown>, route: Route): void {
  switch (route) {
    case "responses":
      if (typeof b.input !== "string" && !Array.isArray(b.input))
        throw new LlmgwError("INVALID_REQUEST", "'input' must be a string or an array of input items", { param: "input" });
      for (const key of ["background", "store"]) optionalType(b, key, "boolean");
      optionalType(b, "previous_response_id", "string");
      return;
    case "messages":
    case "count_tokens":
      // Anthropic's Messages API: max_tokens is required there (count_tokens takes none), and a message list.
      if (!Array.isArray(b.messages) || b.messages.length === 0)
        throw new LlmgwError("INVALID_REQUEST", "'messages' must be a non-empty array", { param: "messages" });
      if (route === "count_tokens") break;
      if (b.max_tokens === undefined || b.max_tokens === null) throw new LlmgwError("INVALID_REQUEST", "'max_tokens' is required", { param: "max_tokens" });
      return;
    case "tokenize":
      if (typeof b.prompt !== "string" && !Array.isArray(b.prompt) && !Array.isArray(b.messages)) {
        throw new LlmgwError("INVALID_REQUEST", "'prompt' (a string) or 'messages' (an array) is required", { param: "prompt" });
      }
      break;
    case "detokenize":
      if (!Array.isArray(b.tokens) || !b.tokens.every((t) => Number.isInteger(t)))
        throw new LlmgwError("INVALID_REQUEST", "'tokens' must be an array of token ids", { param: "tokens" });
      break;
    case "rerank":
      if (typeof b.query !== "string" && (typeof b.query !== "object" || b.query === null))
        throw new LlmgwError("INVALID_REQUEST", "'query' is required", { param: "query" });
      if (!Array.isArray(b.documents) && (typeof b.documents !== "object" || b.documents === null))
        throw new LlmgwError("INVALID_REQUEST", "'documents' must be an array", { param: "documents" });
      break;
    case "pooling":
    case "classify":
      if (b.input === undefined && !Array.isArray(b.messages))
        throw new LlmgwError("INVALID_REQUEST", "'input' (or 'messages') is required", { param: "input" });
      break;
    default:
      break;
  }
  // vLLM streams none of these: a stream asked for is refused here rather than answered with JSON.
  if (b.stream === true) throw new LlmgwError("INVALID_REQUEST", `'stream' is not supported on the ${route} route`, { param: "stream" });
}
