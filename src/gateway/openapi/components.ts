/** The reusable parts of the data plane's OpenAPI document: the error shape, the auth scheme, llmgw's headers and the request and answer schemas. */

type Json = Record<string, unknown>;

const ref = (kind: "schemas" | "parameters" | "headers" | "responses", name: string): Json => ({ $ref: `#/components/${kind}/${name}` });
export const schemaRef = (name: string): Json => ref("schemas", name);
export const parameterRef = (name: string): Json => ref("parameters", name);
export const responseRef = (name: string): Json => ref("responses", name);

/** Bodies are the engine's own (OpenAI's shape): the gateway reads a few fields and forwards the rest untouched, so every object stays open. */
const open = (properties: Json, required: string[] = [], description?: string): Json => ({
  type: "object",
  ...(description ? { description } : {}),
  properties,
  ...(required.length > 0 ? { required } : {}),
  additionalProperties: true,
});

const modelField = {
  type: "string",
  description: "a model or alias the gateway serves (GET /v1/models), or a LoRA adapter listed by an engine; 1-256 printable characters",
};
const streamField = { type: "boolean", description: "answer as server-sent events (text/event-stream), ended by `data: [DONE]`" };
const streamOptions = {
  type: ["object", "null"],
  properties: { include_usage: { type: "boolean", description: "a last chunk with `usage` and no choices" } },
};

const schemas: Record<string, Json> = {
  Error: {
    type: "object",
    description: "Every error of the data plane: OpenAI's shape, with a stable `code` (docs/errors.md)",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["message", "type", "param", "code"],
        properties: {
          message: { type: "string", description: "for people; match on `code`" },
          type: {
            type: "string",
            enum: ["invalid_request_error", "authentication_error", "rate_limit_error", "server_error", "timeout_error", "service_unavailable_error"],
          },
          param: { type: ["string", "null"], description: "the offending field, where there is one" },
          code: { type: ["string", "null"], description: "e.g. INVALID_API_KEY, MODEL_NOT_FOUND, UPSTREAM_TOTAL_TIMEOUT" },
        },
      },
    },
  },
  ChatCompletionRequest: open(
    {
      model: modelField,
      messages: { type: "array", minItems: 1, items: open({ role: { type: "string" }, content: {} }, ["role"]) },
      stream: streamField,
      stream_options: streamOptions,
      max_tokens: { type: "integer", minimum: 1 },
      max_completion_tokens: { type: "integer", minimum: 1 },
      n: { type: "integer", minimum: 1 },
      tools: { type: "array", items: { type: "object" } },
      tool_choice: {},
    },
    ["model", "messages"],
    "OpenAI's chat completion request; other fields (sampling, vLLM's extra parameters) reach the engine unchanged",
  ),
  CompletionRequest: open(
    {
      model: modelField,
      prompt: {
        oneOf: [{ type: "string" }, { type: "array", items: { type: "string" } }, { type: "array", items: { type: "integer" } }],
      },
      stream: streamField,
      stream_options: streamOptions,
      max_tokens: { type: "integer", minimum: 1 },
    },
    ["model", "prompt"],
  ),
  EmbeddingRequest: open(
    {
      model: modelField,
      input: { oneOf: [{ type: "string" }, { type: "array", items: { type: "string" } }, { type: "array", items: { type: "integer" } }] },
      encoding_format: { type: "string", enum: ["float", "base64"] },
    },
    ["model", "input"],
  ),
  ResponseRequest: open(
    {
      model: modelField,
      input: { oneOf: [{ type: "string" }, { type: "array", items: { type: "object" } }] },
      instructions: { type: "string" },
      previous_response_id: { type: "string", description: "continue a stored response of the same tenant" },
      store: { type: "boolean", description: "keep the response (default true) for GET and follow-ups" },
      background: { type: "boolean", description: "answer at once with status queued; poll GET /v1/responses/{response_id}" },
      stream: streamField,
      max_output_tokens: { type: "integer", minimum: 1 },
    },
    ["model", "input"],
    "OpenAI's Responses API request",
  ),
  EngineRequest: open(
    { model: modelField },
    ["model"],
    "vLLM's own request body for this route, forwarded as is to an engine of the model that serves the route",
  ),
  TranscriptionRequest: {
    type: "object",
    required: ["file", "model"],
    properties: { file: { type: "string", contentMediaType: "application/octet-stream" }, model: modelField, response_format: { type: "string" } },
  },
  ChatCompletion: open({
    id: { type: "string" },
    object: { const: "chat.completion" },
    model: { type: "string" },
    choices: { type: "array" },
    usage: schemaRef("Usage"),
  }),
  Completion: open({
    id: { type: "string" },
    object: { const: "text_completion" },
    model: { type: "string" },
    choices: { type: "array" },
    usage: schemaRef("Usage"),
  }),
  EmbeddingList: open({
    object: { const: "list" },
    data: { type: "array", items: open({ embedding: {}, index: { type: "integer" } }) },
    usage: schemaRef("Usage"),
  }),
  Response: open({ id: { type: "string" }, object: { const: "response" }, status: { type: "string" }, model: { type: "string" }, output: { type: "array" } }),
  EngineAnswer: open({}, [], "the engine's own answer, passed through"),
  MessagesRequest: open(
    {
      model: modelField,
      max_tokens: { type: "integer", minimum: 1 },
      messages: { type: "array", minItems: 1, items: open({ role: { enum: ["user", "assistant"] }, content: {} }, ["role", "content"]) },
      system: { oneOf: [{ type: "string" }, { type: "array", items: { type: "object" } }] },
      tools: { type: "array", items: open({ name: { type: "string" }, input_schema: { type: "object" } }, ["name"]) },
      tool_choice: { type: "object" },
      stop_sequences: { type: "array", items: { type: "string" } },
      stream: { type: "boolean", description: "answer as Anthropic's events: message_start … message_stop" },
    },
    ["model", "max_tokens", "messages"],
    "Anthropic's Messages API: passed to engines that serve it, translated to a chat completion for those that do not",
  ),
  Message: open({
    id: { type: "string" },
    type: { const: "message" },
    role: { const: "assistant" },
    model: { type: "string" },
    content: { type: "array", items: { type: "object" } },
    stop_reason: { type: ["string", "null"], enum: ["end_turn", "max_tokens", "stop_sequence", "tool_use", null] },
    usage: open({ input_tokens: { type: "integer" }, output_tokens: { type: "integer" } }),
  }),
  CountTokensRequest: open({ model: modelField, messages: { type: "array" }, system: {}, tools: { type: "array" } }, ["model", "messages"]),
  TokenCount: open({ input_tokens: { type: "integer" } }, ["input_tokens"]),
  AnthropicError: {
    type: "object",
    description: "Every error of the Messages routes: Anthropic's shape, with llmgw's stable `code` beside its type",
    required: ["type", "error"],
    properties: {
      type: { const: "error" },
      error: {
        type: "object",
        required: ["type", "message"],
        properties: {
          type: {
            type: "string",
            enum: [
              "invalid_request_error",
              "authentication_error",
              "permission_error",
              "not_found_error",
              "request_too_large",
              "rate_limit_error",
              "api_error",
              "overloaded_error",
              "timeout_error",
            ],
          },
          message: { type: "string" },
          code: { type: "string", description: "llmgw's error code (docs/errors.md)" },
        },
      },
    },
  },
  Usage: open({ prompt_tokens: { type: "integer" }, completion_tokens: { type: "integer" }, total_tokens: { type: "integer" } }),
  ModelList: {
    type: "object",
    required: ["object", "data"],
    properties: {
      object: { const: "list" },
      data: {
        type: "array",
        items: {
          type: "object",
          required: ["id", "object", "created", "owned_by"],
          properties: {
            id: { type: "string" },
            object: { const: "model" },
            created: { type: "integer" },
            owned_by: { type: "string" },
            root: { type: ["string", "null"] },
            parent: { type: ["string", "null"], description: "the base model of a LoRA adapter" },
          },
        },
      },
    },
  },
  File: open({ id: { type: "string" }, object: { const: "file" }, bytes: { type: "integer" }, filename: { type: "string" }, purpose: { type: "string" } }),
  FileList: open({ object: { const: "list" }, data: { type: "array", items: schemaRef("File") } }),
  Batch: open({
    id: { type: "string" },
    object: { const: "batch" },
    endpoint: { type: "string" },
    status: { type: "string" },
    input_file_id: { type: "string" },
  }),
  BatchList: open({ object: { const: "list" }, data: { type: "array", items: schemaRef("Batch") }, has_more: { type: "boolean" } }),
  BatchRequest: {
    type: "object",
    required: ["input_file_id", "endpoint", "completion_window"],
    properties: {
      input_file_id: { type: "string" },
      endpoint: { type: "string", enum: ["/v1/chat/completions", "/v1/completions", "/v1/embeddings"] },
      completion_window: { const: "24h" },
      metadata: { type: "object", additionalProperties: { type: "string" } },
    },
  },
  Deleted: { type: "object", required: ["id", "deleted"], properties: { id: { type: "string" }, object: { type: "string" }, deleted: { const: true } } },
  InputItemList: open({
    object: { const: "list" },
    data: { type: "array" },
    first_id: { type: "string" },
    last_id: { type: "string" },
    has_more: { type: "boolean" },
  }),
};

const header = (description: string, schema: Json = { type: "string" }): Json => ({ description, schema });

const headers: Record<string, Json> = {
  "x-request-id": header(
    "the request's id: the client's own x-request-id if it sent a valid one, else one the gateway made; in the audit line and sent to the engine",
  ),
  "x-llmgw-attempts": header("upstream attempts this answer took (retries and fallbacks included)", { type: "integer", minimum: 1 }),
  "x-llmgw-endpoint": header("the endpoint whose engine answered"),
  "x-llmgw-model": header("the models that wrote the answer, comma-separated (the answering model after a fallback)"),
  "x-llmgw-cache": header("the response cache: hit or miss", { type: "string", enum: ["hit", "miss"] }),
  "x-llmgw-replay": header("the answer was replayed from an earlier request with the same Idempotency-Key", { const: "true" }),
  "retry-after": header("seconds to wait before retrying (429s, ADMISSION_QUEUE_FULL, IDEMPOTENCY_KEY_IN_USE, STATE_UNAVAILABLE)", { type: "number" }),
  "x-ratelimit-remaining-requests": header("the tenant's requests left this minute (with requests_per_minute)", { type: "integer" }),
  "x-ratelimit-remaining-tokens": header("the tenant's tokens left this minute (with tokens_per_minute)", { type: "integer" }),
};

const parameters: Record<string, Json> = {
  RequestId: {
    name: "x-request-id",
    in: "header",
    required: false,
    description: "the client's id for this request (kept when valid)",
    schema: { type: "string" },
  },
  Priority: {
    name: "x-llmgw-priority",
    in: "header",
    required: false,
    description: "the admission band to use: the key's own band or a lower one (interactive, standard, batch by default)",
    schema: { type: "string" },
  },
  IdempotencyKey: {
    name: "Idempotency-Key",
    in: "header",
    required: false,
    description: "a retried POST with the same key and body is answered once: later ones replay the recorded answer (x-llmgw-replay); another body is a 422",
    schema: { type: "string", minLength: 1, maxLength: 255 },
  },
  ResponseId: { name: "response_id", in: "path", required: true, schema: { type: "string" } },
  FileId: { name: "file_id", in: "path", required: true, schema: { type: "string" } },
  BatchId: { name: "batch_id", in: "path", required: true, schema: { type: "string" } },
};

const errorContent = { "application/json": { schema: schemaRef("Error") } };
const errorResponse = (description: string, extraHeaders: string[] = []): Json => ({
  description,
  headers: Object.fromEntries(["x-request-id", ...extraHeaders].map((h) => [h, ref("headers", h)])),
  content: errorContent,
});

const responses: Record<string, Json> = {
  BadRequest: errorResponse(
    "malformed JSON, a missing or mistyped field, or the engine rejected the request (INVALID_JSON, INVALID_REQUEST, UPSTREAM_REJECTED …)",
  ),
  Unauthorized: errorResponse("no API key or a wrong one, while keys are configured (INVALID_API_KEY)"),
  NotFound: errorResponse("no such model, route or object (MODEL_NOT_FOUND, ROUTE_NOT_SERVED, NOT_FOUND)"),
  MethodNotAllowed: errorResponse("wrong method (METHOD_NOT_ALLOWED); the Allow header names the right one"),
  TooLarge: errorResponse("body over max_body_bytes (BODY_TOO_LARGE)"),
  RateLimited: errorResponse("the tenant's quota is spent, the GPUs are saturated or the engine is rate-limiting", [
    "retry-after",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
  ]),
  UpstreamFailed: errorResponse("every attempt failed (UPSTREAM_CONNECT_FAILED, UPSTREAM_ERROR, UPSTREAM_UNAUTHORIZED, UPSTREAM_STREAM_TRUNCATED …)"),
  Unavailable: errorResponse("no ready endpoint, the admission queue is full, or the retry budget is spent", ["retry-after"]),
  Timeout: errorResponse("a deadline passed (UPSTREAM_HEADERS_TIMEOUT, UPSTREAM_FIRST_TOKEN_TIMEOUT, UPSTREAM_TOTAL_TIMEOUT …)"),
};

export const components: Json = {
  securitySchemes: {
    apiKey: {
      type: "http",
      scheme: "bearer",
      description: "an llmgw API key (auth.keys); it names the tenant. Off when no key is configured. Never forwarded to an engine.",
    },
    anthropicApiKey: {
      type: "apiKey",
      in: "header",
      name: "x-api-key",
      description: "the same llmgw API key as Anthropic's clients send it (the Messages routes only, when no Authorization header is sent)",
    },
  },
  schemas,
  headers,
  parameters,
  responses,
};
