/** The OpenAPI 3.1 document of the data plane (GET /openapi.json): every route the gateway answers on `listen`, written by hand beside the routes it describes. */
import { components, parameterRef, responseRef, schemaRef } from "./components.ts";

type Json = Record<string, unknown>;

const json = (schema: Json): Json => ({ "application/json": { schema } });
const sse = { "text/event-stream": { schema: { type: "string", description: "`data: {chunk}` events, then `data: [DONE]`" } } };
const answerHeaders = Object.fromEntries(
  ["x-request-id", "x-llmgw-attempts", "x-llmgw-endpoint", "x-llmgw-model", "x-llmgw-cache", "x-llmgw-replay"].map((h) => [
    h,
    { $ref: `#/components/headers/${h}` },
  ]),
);

/** The errors every authenticated route may answer, plus those of the routes that reach an engine. */
const ERRORS: Json = {
  "400": responseRef("BadRequest"),
  "401": responseRef("Unauthorized"),
  "404": responseRef("NotFound"),
  "405": responseRef("MethodNotAllowed"),
  "413": responseRef("TooLarge"),
  "429": responseRef("RateLimited"),
};
const UPSTREAM_ERRORS: Json = { ...ERRORS, "502": responseRef("UpstreamFailed"), "503": responseRef("Unavailable"), "504": responseRef("Timeout") };

/** One inference route: a body the gateway routes on `model`, answered by an engine (as JSON, or as events when it streams). */
function inference(tag: string, summary: string, body: string, answer: string, streams: boolean, description?: string): Json {
  return {
    post: {
      tags: [tag],
      summary,
      ...(description ? { description } : {}),
      parameters: [parameterRef("RequestId"), parameterRef("Priority"), parameterRef("IdempotencyKey")],
      requestBody: { required: true, content: json(schemaRef(body)) },
      responses: {
        "200": {
          description: streams ? "the answer; with stream: true, server-sent events" : "the answer",
          headers: answerHeaders,
          content: { ...json(schemaRef(answer)), ...(streams ? sse : {}) },
        },
        ...UPSTREAM_ERRORS,
      },
    },
  };
}

/** vLLM's other routes: forwarded as is to an engine of the body's model that serves them. */
const vllm = (summary: string) => inference("vLLM routes", summary, "EngineRequest", "EngineAnswer", false);

const operation = (tag: string, summary: string, responses: Json, extra: Json = {}): Json => ({
  tags: [tag],
  summary,
  ...extra,
  responses: { ...responses, ...ERRORS },
});
const ok = (description: string, schema: Json, contentType = "application/json"): Json => ({
  "200": { description, headers: { "x-request-id": { $ref: "#/components/headers/x-request-id" } }, content: { [contentType]: { schema } } },
});

const OPENAI_PATHS: Record<string, Json> = {
  "/v1/chat/completions": inference("OpenAI", "Chat completion", "ChatCompletionRequest", "ChatCompletion", true),
  "/v1/completions": inference("OpenAI", "Text completion", "CompletionRequest", "Completion", true),
  "/v1/embeddings": inference("OpenAI", "Embeddings", "EmbeddingRequest", "EmbeddingList", false),
  "/v1/responses": inference(
    "OpenAI",
    "Create a response (Responses API)",
    "ResponseRequest",
    "Response",
    true,
    "Stored per tenant unless store: false; previous_response_id continues a stored one; background: true answers at once",
  ),
  "/v1/audio/transcriptions": {
    post: {
      tags: ["OpenAI"],
      summary: "Transcribe audio (multipart/form-data, up to max_audio_bytes)",
      parameters: [parameterRef("RequestId"), parameterRef("Priority")],
      requestBody: { required: true, content: { "multipart/form-data": { schema: schemaRef("TranscriptionRequest") } } },
      responses: { "200": { description: "the transcription", headers: answerHeaders, content: json(schemaRef("EngineAnswer")) }, ...UPSTREAM_ERRORS },
    },
  },
  "/v1/models": {
    get: operation("OpenAI", "The models and aliases this gateway serves, with LoRA adapters engines list", ok("the model list", schemaRef("ModelList"))),
  },
};

const RESPONSES_PATHS: Record<string, Json> = {
  "/v1/responses/{response_id}": {
    parameters: [parameterRef("ResponseId")],
    get: operation("Stored responses", "A stored response of the tenant", ok("the response", schemaRef("Response"))),
    delete: operation("Stored responses", "Delete a stored response", ok("deleted", schemaRef("Deleted"))),
  },
  "/v1/responses/{response_id}/input_items": {
    parameters: [parameterRef("ResponseId")],
    get: operation("Stored responses", "The input items of a stored response, a cursor page", ok("a page of items", schemaRef("InputItemList")), {
      parameters: [
        { name: "after", in: "query", required: false, schema: { type: "string" } },
        { name: "limit", in: "query", required: false, schema: { type: "integer", minimum: 1, maximum: 100, default: 20 } },
        { name: "order", in: "query", required: false, schema: { type: "string", enum: ["asc", "desc"], default: "desc" } },
      ],
    }),
  },
  "/v1/responses/{response_id}/cancel": {
    parameters: [parameterRef("ResponseId")],
    post: operation("Stored responses", "Cancel a background response", ok("the response, cancelled", schemaRef("Response"))),
  },
};

const JOBS_PATHS: Record<string, Json> = {
  "/v1/files": {
    post: operation("Files and batches", "Upload a file (multipart/form-data: file, purpose)", ok("the file", schemaRef("File")), {
      requestBody: {
        required: true,
        content: {
          "multipart/form-data": {
            schema: { type: "object", required: ["file", "purpose"], properties: { file: { type: "string" }, purpose: { type: "string" } } },
          },
        },
      },
    }),
    get: operation("Files and batches", "The tenant's files", ok("the files", schemaRef("FileList"))),
  },
  "/v1/files/{file_id}": {
    parameters: [parameterRef("FileId")],
    get: operation("Files and batches", "A file's object", ok("the file", schemaRef("File"))),
    delete: operation("Files and batches", "Delete a file", ok("deleted", schemaRef("Deleted"))),
  },
  "/v1/files/{file_id}/content": {
    parameters: [parameterRef("FileId")],
    get: operation("Files and batches", "A file's bytes (JSON lines)", ok("the content", { type: "string" }, "application/octet-stream")),
  },
  "/v1/batches": {
    post: operation("Files and batches", "Create a batch (runs once per Idempotency-Key)", ok("the batch", schemaRef("Batch")), {
      parameters: [parameterRef("IdempotencyKey")],
      requestBody: { required: true, content: json(schemaRef("BatchRequest")) },
    }),
    get: operation("Files and batches", "The tenant's batches", ok("the batches", schemaRef("BatchList"))),
  },
  "/v1/batches/{batch_id}": {
    parameters: [parameterRef("BatchId")],
    get: operation("Files and batches", "A batch", ok("the batch", schemaRef("Batch"))),
  },
  "/v1/batches/{batch_id}/cancel": {
    parameters: [parameterRef("BatchId")],
    post: operation("Files and batches", "Cancel a batch", ok("the batch, cancelling", schemaRef("Batch"))),
  },
};

const VLLM_PATHS: Record<string, Json> = {
  "/tokenize": vllm("Tokenize (vLLM)"),
  "/detokenize": vllm("Detokenize (vLLM)"),
  "/score": vllm("Score text pairs (vLLM)"),
  "/v1/score": vllm("Score text pairs (vLLM)"),
  "/rerank": vllm("Rerank documents (vLLM, Jina/Cohere shape)"),
  "/v1/rerank": vllm("Rerank documents (vLLM, Jina/Cohere shape)"),
  "/v2/rerank": vllm("Rerank documents (vLLM, Cohere v2 shape)"),
  "/pooling": vllm("Pooling (vLLM)"),
  "/classify": vllm("Classify (vLLM)"),
};

/** Other APIs the gateway speaks beside OpenAI's (the Anthropic Messages API's /v1/messages routes belong here). */
/** Anthropic's Messages API: its own body, answer, events and error shape; an llmgw key as a bearer token or as x-api-key. */
const anthropicError = (description: string): Json => ({ description, content: json(schemaRef("AnthropicError")) });
const ANTHROPIC_ERRORS: Json = Object.fromEntries(
  [
    ["400", "invalid_request_error"],
    ["401", "authentication_error (a wrong or missing llmgw key)"],
    ["404", "not_found_error (no such model)"],
    ["413", "request_too_large"],
    ["429", "rate_limit_error (quota, saturation or the engine's own limit; Retry-After)"],
    ["502", "api_error (every attempt failed)"],
    ["503", "overloaded_error (no ready endpoint, a full queue; Retry-After)"],
    ["504", "timeout_error (a deadline passed)"],
  ].map(([status, what]) => [status, anthropicError(what!)]),
);
const anthropic = (summary: string, body: string, answer: string, streams: boolean): Json => ({
  post: {
    tags: ["Anthropic"],
    summary,
    security: [{ apiKey: [] }, { anthropicApiKey: [] }],
    parameters: [parameterRef("RequestId"), parameterRef("Priority"), parameterRef("IdempotencyKey")],
    requestBody: { required: true, content: json(schemaRef(body)) },
    responses: {
      "200": {
        description: streams ? "the message; with stream: true, Anthropic's events (message_start … message_stop)" : "the count",
        headers: answerHeaders,
        content: {
          ...json(schemaRef(answer)),
          ...(streams ? { "text/event-stream": { schema: { type: "string", description: "`event: {type}` and `data: {event}` pairs" } } } : {}),
        },
      },
      ...ANTHROPIC_ERRORS,
    },
  },
});

const OTHER_API_PATHS: Record<string, Json> = {
  "/v1/messages": anthropic("Create a message (Anthropic's Messages API)", "MessagesRequest", "Message", true),
  "/v1/messages/count_tokens": anthropic("Count a message's input tokens", "CountTokensRequest", "TokenCount", false),
};

const PUBLIC_PATHS: Record<string, Json> = {
  "/health": { get: { tags: ["Gateway"], summary: "Liveness: 200 while the process serves", security: [], responses: { "200": { description: "alive" } } } },
  "/openapi.json": {
    get: {
      tags: ["Gateway"],
      summary: "This document",
      description: "Public, like OpenAI's own specification: it describes the API's shape and names no model, endpoint or tenant",
      security: [],
      responses: { "200": { description: "the OpenAPI document", content: json({ type: "object" }) } },
    },
  },
};

const DESCRIPTION = `An OpenAI-compatible gateway in front of vLLM and SGLang engines. Routes are answered as OpenAI (and vLLM) answer them; \
errors have OpenAI's shape with a stable code (docs/errors.md). With API keys configured every route but /health and /openapi.json \
wants \`Authorization: Bearer <key>\`; the key names the tenant and is never sent to an engine.`;

let built: Json | undefined;

/** The document (built once; it depends on no configuration). */
export function dataPlaneOpenApi(): Json {
  built ??= {
    openapi: "3.1.0",
    info: { title: "llmgw data plane", version: "0.1.0", description: DESCRIPTION },
    security: [{ apiKey: [] }],
    tags: [
      { name: "OpenAI", description: "OpenAI's API, routed by model" },
      { name: "Anthropic", description: "Anthropic's Messages API, routed by model through the same gates as chat" },
      { name: "Stored responses", description: "the Responses API's stored state, per tenant" },
      { name: "Files and batches", description: "the Files and Batch APIs, per tenant" },
      { name: "vLLM routes", description: "vLLM's own routes, sent to an engine of the body's model that serves them" },
      { name: "Gateway", description: "the gateway itself" },
    ],
    paths: { ...OPENAI_PATHS, ...OTHER_API_PATHS, ...RESPONSES_PATHS, ...JOBS_PATHS, ...VLLM_PATHS, ...PUBLIC_PATHS },
    components,
  };
  return built;
}
