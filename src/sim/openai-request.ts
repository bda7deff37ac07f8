/**
 * Parsing and validation of the sim-engine's OpenAI request bodies (chat,
 * completions, embeddings), with vLLM's status codes and messages for bad
 * input. Pure: body text in, a typed request or a SimHttpError out.
 */
import { type ChoicePlan, planChoices } from "./answer-plan.ts";
import type { LengthDistribution } from "./output-length.ts";
import { answerWithToolCall, forcedToolChoice } from "./routes/tool-calls.ts";
import { type ChatEnding, chatPrompt, countTextTokens, idsPrompt, type PromptTokens, textPrompt, tokenText, VOCAB_END } from "./tokens.ts";
import { badRequest, SimHttpError } from "./vllm-errors.ts";

export interface GenerationRequest {
  kind: "chat" | "completion";
  model: string;
  stream: boolean;
  includeUsage: boolean;
  /** The (first) prompt. */
  prompt: PromptTokens;
  /** Every prompt: a completion may carry a batch of them. */
  prompts: PromptTokens[];
  /** The first choice's answer (what n = 1 gives). */
  outputTokens: number;
  finishReason: "stop" | "length";
  /** One per prompt × n, in `index` order. */
  choices: ChoicePlan[];
  /** The client's n and max_tokens (max_completion_tokens), as vLLM's request_params_* histograms record them. */
  n: number;
  maxTokens: number | undefined;
}

interface EmbeddingRequest {
  model: string;
  inputs: { text: string; tokens: number }[];
}

export interface RequestLimits {
  models: readonly string[];
  maxModelLen: number;
  blockSize: number;
  /** Output length when max_tokens does not cap it (when no distribution is given). */
  outputLen: number;
  /** Natural output lengths, drawn per prompt (absent: always outputLen). */
  outputLenDist?: LengthDistribution;
  /** LoRA adapters the engine serves by name (absent: LoRA off). */
  adapters?: { has(name: string): boolean };
  /** Answer 400 to a chat prefill (continue_final_message, add_generation_prompt), as an API that does not know them does. */
  rejectContinuation?: boolean;
  /** The root of the block-hash chain (vLLM's NONE_HASH); absent: 0. */
  hashRoot?: bigint;
}

/** Choices per request (n × prompts) the sim accepts. */
const MAX_CHOICES = 128;

/** The chat template parameters of vLLM and SGLang that OpenAI's own API does not know. */
const PREFILL_KEYS = ["continue_final_message", "add_generation_prompt"] as const;

type Obj = Record<string, unknown>;

export function parseJsonObject(body: string): Obj {
  let v: unknown;
  try {
    v = JSON.parse(body);
  } catch (err) {
    throw badRequest(`JSON decode error: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw badRequest("Input should be a valid dictionary (the request body must be a JSON object)");
  return v as Obj;
}

function checkModel(o: Obj, limits: RequestLimits): string {
  const model = o.model;
  if (model === undefined || model === null) throw badRequest("model: Field required", "model");
  if (typeof model !== "string") throw badRequest("model: Input should be a valid string", "model");
  if (!limits.models.includes(model) && !limits.adapters?.has(model))
    throw new SimHttpError(404, "NotFoundError", `The model \`${model}\` does not exist.`, "model");
  return model;
}

function optBool(o: Obj, key: string): boolean | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") throw badRequest(`${key}: Input should be a valid boolean`, key);
  return v;
}

function optInt(o: Obj, key: string, min: number): number | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v)) throw badRequest(`${key}: Input should be a valid integer`, key);
  if (v < min) throw badRequest(`${key} must be at least ${min}, got ${v}.`, key);
  return v;
}

/** vLLM's `seed`: any 64-bit signed integer. */
function optSeed(o: Obj): number | undefined {
  const v = o.seed;
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v)) throw badRequest("seed: Input should be a valid integer", "seed");
  if (v < -(2 ** 63) || v >= 2 ** 63) throw badRequest("seed: Input should be a 64-bit signed integer", "seed");
  return v;
}

function optNumber(o: Obj, key: string): void {
  const v = o[key];
  if (v !== undefined && v !== null && typeof v !== "number") throw badRequest(`${key}: Input should be a valid number`, key);
}

function messageText(content: unknown, i: number): string {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw badRequest(`messages[${i}].content: Input should be a valid string or a list of content parts`, "messages");
  let out = "";
  for (const part of content) {
    if (typeof part !== "object" || part === null) throw badRequest(`messages[${i}].content: each part must be an object`, "messages");
    const p = part as Obj;
    if (p.type === "text") {
      if (typeof p.text !== "string") throw badRequest(`messages[${i}].content: a text part needs a string 'text'`, "messages");
      out += p.text;
    }
  }
  return out;
}

/**
 * How the chat template ends, from continue_final_message and
 * add_generation_prompt, refusing the pair the way vLLM does: both set true
 * fails its request validator (ChatCompletionRequest.check_generation_prompt);
 * continue_final_message with add_generation_prompt left at its default
 * (true) fails in transformers' apply_chat_template. Both are 400s.
 */
function chatEnding(o: Obj): ChatEnding {
  const cont = optBool(o, "continue_final_message") ?? false;
  const addGen = optBool(o, "add_generation_prompt");
  if (cont && addGen === true) throw badRequest("Value error, Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
  if (cont && addGen === undefined) {
    throw badRequest(
      "continue_final_message and add_generation_prompt are not compatible. Use continue_final_message when you want the model to continue the final message, and add_generation_prompt when you want to add a header that will prompt it to start a new assistant message instead.",
    );
  }
  if (cont) return "continue-final";
  return addGen === false ? "none" : "generation-prompt";
}

/**
 * How a request's blocks are hashed: from the engine's root, with the
 * request's cache_salt as an extra key of its first block, so a salted
 * request shares no block with another salt or with none
 * (vllm/v1/core/kv_cache_utils.py, generate_block_hash_extra_keys). vLLM
 * refuses a salt that is not a non-empty string (check_cache_salt_support).
 */
export function promptHashKeys(o: Obj, limits: RequestLimits): { root: bigint; salt?: string } {
  const root = limits.hashRoot ?? 0n;
  const salt = o.cache_salt;
  if (salt === undefined || salt === null) return { root };
  if (typeof salt !== "string" || salt === "") throw badRequest("Value error, Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt");
  return { root, salt };
}

function chatRequestPrompt(o: Obj, limits: RequestLimits, seed: number | undefined, keys: { root: bigint; salt?: string }): PromptTokens {
  const messages = o.messages;
  if (messages === undefined) throw badRequest("messages: Field required", "messages");
  if (!Array.isArray(messages)) throw badRequest("messages: Input should be a valid list", "messages");
  if (messages.length === 0) throw badRequest("messages: List should have at least 1 item", "messages");
  const rendered = messages.map((m: unknown, i) => {
    if (typeof m !== "object" || m === null) throw badRequest(`messages[${i}]: Input should be a valid dictionary`, "messages");
    const role = (m as Obj).role;
    if (typeof role !== "string") throw badRequest(`messages[${i}].role: Field required`, "messages");
    return { role, content: messageText((m as Obj).content, i) };
  });
  return chatPrompt(rendered, chatEnding(o), limits.blockSize, seed, keys);
}

/** vLLM takes a string, a list of strings, a list of token ids or a list of such lists (a batch: one set of choices per prompt). */
/** vLLM refuses a prompt id past its vocabulary (vllm/v1/engine/processor.py, _validate_model_input). */
function checkVocab(ids: readonly number[]): number[] {
  let max = -1;
  for (const t of ids) if (t > max) max = t;
  if (max >= VOCAB_END) throw badRequest(`Token id ${max} is out of vocabulary`, "prompt");
  return ids as number[];
}

function completionPrompts(o: Obj, limits: RequestLimits, seed: number | undefined): PromptTokens[] {
  const { blockSize } = limits;
  const hashRoot = promptHashKeys(o, limits);
  const p = o.prompt;
  if (p === undefined || p === null) throw badRequest("prompt: Field required", "prompt");
  if (typeof p === "string") return [textPrompt(p, blockSize, seed, hashRoot)];
  const isIds = (v: unknown): v is number[] => Array.isArray(v) && v.length > 0 && v.every((t) => typeof t === "number" && Number.isInteger(t) && t >= 0);
  if (Array.isArray(p) && p.length > 0) {
    if (isIds(p)) return [idsPrompt(checkVocab(p), blockSize, seed, hashRoot)];
    if (p.every((x) => typeof x === "string")) return (p as string[]).map((x) => textPrompt(x, blockSize, seed, hashRoot));
    if (p.every(isIds)) return (p as number[][]).map((ids) => idsPrompt(checkVocab(ids), blockSize, seed, hashRoot));
  }
  throw badRequest("prompt: expected a string, a list of strings, a list of token ids or a list of such lists", "prompt");
}

function stopStrings(o: Obj): string[] {
  const v = o.stop;
  if (v === undefined || v === null) return [];
  if (typeof v === "string") return v === "" ? [] : [v];
  if (Array.isArray(v) && v.every((x) => typeof x === "string")) return (v as string[]).filter((x) => x !== "");
  throw badRequest("stop: Input should be a valid string or a list of strings", "stop");
}

export function parseGenerationRequest(kind: "chat" | "completion", body: string, limits: RequestLimits): GenerationRequest {
  const o = parseJsonObject(body);
  const model = checkModel(o, limits);
  const stream = optBool(o, "stream") ?? false;
  let includeUsage = false;
  const so = o.stream_options;
  if (so !== undefined && so !== null) {
    if (typeof so !== "object" || Array.isArray(so)) throw badRequest("stream_options: Input should be a valid dictionary", "stream_options");
    if (!stream) throw badRequest("Stream options can only be defined when `stream=True`.", "stream_options");
    includeUsage = optBool(so as Obj, "include_usage") ?? false;
  }
  const n = optInt(o, "n", 1) ?? 1;
  // vLLM bounds n only by what the engine can hold; the sim keeps one request from flooding its loop.
  if (n > MAX_CHOICES) throw badRequest(`n: the sim-engine serves at most ${MAX_CHOICES} choices per request, got ${n}`, "n");
  for (const k of ["temperature", "top_p", "presence_penalty", "frequency_penalty"]) optNumber(o, k);
  const ignoreEos = optBool(o, "ignore_eos") ?? false;
  const maxTokens = optInt(o, "max_completion_tokens", 1) ?? optInt(o, "max_tokens", 1);
  const seed = optSeed(o);
  if (kind === "chat" && limits.rejectContinuation) {
    // OpenAI's wording for a parameter it does not know.
    const unknown = PREFILL_KEYS.find((k) => o[k] !== undefined);
    if (unknown !== undefined) throw badRequest(`Unrecognized request argument supplied: ${unknown}`, unknown);
  }
  const minTokens = optInt(o, "min_tokens", 0) ?? 0;
  if (maxTokens !== undefined && minTokens > maxTokens)
    throw badRequest(`min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${minTokens}.`, "min_tokens");
  const stop = stopStrings(o);
  const includeStopStr = optBool(o, "include_stop_str_in_output") ?? false;
  const prompts = kind === "chat" ? [chatRequestPrompt(o, limits, seed, promptHashKeys(o, limits))] : completionPrompts(o, limits, seed);
  if (prompts.length * n > MAX_CHOICES)
    throw badRequest(`the sim-engine serves at most ${MAX_CHOICES} choices per request (prompts × n), got ${prompts.length * n}`, "n");
  for (const prompt of prompts) checkLength(prompt, maxTokens, limits.maxModelLen);
  const choices = planChoices(prompts, { maxTokens, ignoreEos, minTokens, stop, includeStopStr, n }, limits);
  const forced = kind === "chat" ? forcedToolChoice(o) : undefined;
  if (forced) for (const c of choices) answerWithToolCall(c, forced, maxTokens);
  const first = choices[0]!;
  return {
    kind,
    model,
    stream,
    includeUsage,
    prompt: prompts[0]!,
    prompts,
    outputTokens: first.outputTokens,
    finishReason: first.finishReason,
    choices,
    n,
    maxTokens,
  };
}

function checkLength(prompt: PromptTokens, maxTokens: number | undefined, maxLen: number): void {
  if (prompt.count >= maxLen) {
    throw badRequest(
      `This model's maximum context length is ${maxLen} tokens. However, your request has ${prompt.count} input tokens. Please reduce the length of the input messages.`,
    );
  }
  if (maxTokens !== undefined && prompt.count + maxTokens > maxLen) {
    throw badRequest(
      `This model's maximum context length is ${maxLen} tokens. However, you requested ${prompt.count + maxTokens} tokens (${prompt.count} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
    );
  }
}

export function parseEmbeddingRequest(body: string, limits: RequestLimits): EmbeddingRequest {
  const o = parseJsonObject(body);
  const model = checkModel(o, limits);
  const input = o.input;
  if (input === undefined || input === null) throw badRequest("input: Field required", "input");
  const items: { text: string; tokens: number }[] = [];
  const isIds = (v: unknown): v is number[] => Array.isArray(v) && v.length > 0 && v.every((t) => typeof t === "number" && Number.isInteger(t));
  if (typeof input === "string") items.push({ text: input, tokens: countTextTokens(input) });
  else if (isIds(input)) items.push({ text: input.join(","), tokens: input.length });
  else if (Array.isArray(input) && input.length > 0 && input.every((s) => typeof s === "string"))
    for (const s of input as string[]) items.push({ text: s, tokens: countTextTokens(s) });
  else if (Array.isArray(input) && input.length > 0 && input.every(isIds))
    for (const ids of input as number[][]) items.push({ text: ids.join(","), tokens: ids.length });
  else throw badRequest("input: expected a string, a list of strings, a list of token ids or a list of such lists", "input");
  for (const it of items) {
    if (it.tokens > limits.maxModelLen) {
      throw badRequest(
        `This model's maximum context length is ${limits.maxModelLen} tokens. However, you requested ${it.tokens} tokens in the input for embedding generation. Please reduce the length of the input.`,
      );
    }
  }
  return { model, inputs: items };
}

interface TokenizeRequest {
  prompt: PromptTokens;
  /** return_token_strs: answer each token's text too. */
  tokenStrs: boolean;
}

/**
 * vLLM's /tokenize body (vllm/entrypoints/openai/protocol.py,
 * TokenizeCompletionRequest | TokenizeChatRequest): `messages` makes it a
 * chat request, tokenized through the chat template with
 * add_generation_prompt (default true) and continue_final_message (default
 * false), refused together as vLLM refuses them; otherwise `prompt`, a
 * string. `model` may be left out. The ids are the ones the same prompt gets
 * in a generation request.
 */
export function parseTokenizeRequest(body: string, limits: RequestLimits): TokenizeRequest {
  const o = parseJsonObject(body);
  if (o.model !== undefined && o.model !== null) checkModel(o, limits);
  optBool(o, "add_special_tokens");
  const tokenStrs = optBool(o, "return_token_strs") ?? false;
  if (o.messages !== undefined) return { prompt: chatRequestPrompt(o, limits, undefined, { root: limits.hashRoot ?? 0n }), tokenStrs };
  const p = o.prompt;
  if (p === undefined || p === null) throw badRequest("prompt: Field required (or messages, for a chat request)", "prompt");
  if (typeof p !== "string") throw badRequest("prompt: Input should be a valid string", "prompt");
  return { prompt: textPrompt(p, limits.blockSize, undefined, limits.hashRoot), tokenStrs };
}

/** vLLM's /detokenize body: `tokens`, a list of token ids; `model` may be left out. The ids' text, or a 400 for one the sim never produces. */
export function parseDetokenizeRequest(body: string, limits: RequestLimits): string {
  const o = parseJsonObject(body);
  if (o.model !== undefined && o.model !== null) checkModel(o, limits);
  const t = o.tokens;
  if (t === undefined || t === null) throw badRequest("tokens: Field required", "tokens");
  if (!Array.isArray(t) || !t.every((x) => typeof x === "number" && Number.isInteger(x)))
    throw badRequest("tokens: Input should be a valid list of integers", "tokens");
  let text = "";
  for (const id of t as number[]) {
    const piece = tokenText(id);
    if (piece === undefined) throw badRequest(`Token id ${id} is out of vocabulary`, "tokens");
    text += piece;
  }
  return text;
}
