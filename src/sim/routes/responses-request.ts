/**
 * The sim-engine's reading of a Responses API request (POST /v1/responses),
 * as vLLM's ResponsesRequest and serving_responses.py take it: `input` as a
 * string or a list of items (messages with text or content parts, function
 * calls and their outputs), `instructions` as the system message, the chat
 * template ending with the generation prompt — or leaving the final
 * assistant message open when it is partial (status in_progress or
 * incomplete: vLLM's should_continue_final_message, the prefill a
 * continuation sends) — `max_output_tokens`, sampling, and a forced tool
 * call. Like vLLM without VLLM_ENABLE_RESPONSES_API_STORE, it keeps no
 * state: a `previous_response_id` is a 404 and `background` a 400 (a
 * gateway in front keeps the state). Pure: body text in, a plan or a
 * SimHttpError out.
 */
import { type ChoicePlan, planChoices } from "../answer-plan.ts";
import { parseJsonObject, promptHashKeys, type RequestLimits } from "../openai-request.ts";
import { type ChatEnding, chatPrompt } from "../tokens.ts";
import { badRequest, SimHttpError } from "../vllm-errors.ts";
import { answerWithToolCall, forcedToolChoice } from "./tool-calls.ts";

type Obj = Record<string, unknown>;

interface ResponsesRequest {
  model: string;
  stream: boolean;
  /** The one answer (the Responses API has no n). */
  plan: ChoicePlan;
  /** The response object's fields that echo the request (ResponsesResponse.from_request). */
  echo: Obj;
  /** The id vLLM answers under: the request's request_id (a vLLM extra), or a fresh resp_… */
  id: string;
}

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A message's content as text: a string, or the text of its parts (input_text, output_text, text). */
function contentText(content: unknown, where: string): string {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw badRequest(`${where}.content: Input should be a valid string or a list of content parts`, "input");
  let out = "";
  for (const part of content) {
    if (!isObj(part)) throw badRequest(`${where}.content: each part must be an object`, "input");
    if (typeof part.text === "string") out += part.text;
  }
  return out;
}

/** vLLM's construct_input_messages, rendered: each input item as a chat message. */
function inputMessages(o: Obj): { role: string; content: string }[] {
  const messages: { role: string; content: string }[] = [];
  if (typeof o.instructions === "string" && o.instructions !== "") messages.push({ role: "system", content: o.instructions });
  const input = o.input;
  if (input === undefined || input === null) throw badRequest("input: Field required", "input");
  if (typeof input === "string") {
    messages.push({ role: "user", content: input });
    return messages;
  }
  if (!Array.isArray(input)) throw badRequest("input: Input should be a valid string or a list of items", "input");
  input.forEach((item: unknown, i) => {
    const where = `input[${i}]`;
    if (!isObj(item)) throw badRequest(`${where}: Input should be a valid dictionary`, "input");
    switch (item.type ?? "message") {
      case "message":
        if (typeof item.role !== "string") throw badRequest(`${where}.role: Field required`, "input");
        messages.push({ role: item.role, content: contentText(item.content, where) });
        return;
      case "function_call":
        messages.push({ role: "assistant", content: `[call ${String(item.name)}(${String(item.arguments)})]` });
        return;
      case "function_call_output":
        messages.push({ role: "tool", content: typeof item.output === "string" ? item.output : JSON.stringify(item.output ?? "") });
        return;
      case "reasoning":
        return; // dropped from the prompt, as chat templates drop earlier reasoning
      default:
        throw badRequest(`${where}.type: unsupported input item type '${String(item.type)}'`, "input");
    }
  });
  if (messages.length === 0) throw badRequest("input: List should have at least 1 item", "input");
  return messages;
}

/** vLLM's should_continue_final_message: the last item is an assistant message left partial. */
function continuesFinalMessage(input: unknown): boolean {
  if (!Array.isArray(input) || input.length === 0) return false;
  const last: unknown = input[input.length - 1];
  return isObj(last) && (last.type ?? "message") === "message" && last.role === "assistant" && (last.status === "in_progress" || last.status === "incomplete");
}

function optInt(o: Obj, key: string, min: number): number | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v)) throw badRequest(`${key}: Input should be a valid integer`, key);
  if (v < min) throw badRequest(`${key}: Input should be greater than or equal to ${min}`, key);
  return v;
}

function optNumber(o: Obj, key: string, dflt: number): number {
  const v = o[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== "number") throw badRequest(`${key}: Input should be a valid number`, key);
  return v;
}

export function parseResponsesRequest(body: string, limits: RequestLimits): ResponsesRequest {
  const o = parseJsonObject(body);
  const model = o.model;
  if (typeof model !== "string") throw badRequest("model: Field required", "model");
  if (!limits.models.includes(model) && !limits.adapters?.has(model))
    throw new SimHttpError(404, "NotFoundError", `The model \`${model}\` does not exist.`, "model");
  if (o.stream !== undefined && o.stream !== null && typeof o.stream !== "boolean") throw badRequest("stream: Input should be a valid boolean", "stream");
  const store = o.store ?? true;
  if (o.background === true) {
    // ResponsesRequest.validate_background, then serving_responses: no store, no background mode.
    if (store === false) throw badRequest("Value error, background can only be used when `store` is true", "background");
    throw badRequest(
      "This vLLM engine does not support `store=True` and therefore does not support the background mode. To enable these features, set the environment variable `VLLM_ENABLE_RESPONSES_API_STORE=1` when launching the vLLM server.",
      "background",
    );
  }
  if (typeof o.previous_response_id === "string") {
    throw new SimHttpError(404, "NotFoundError", `Response with id '${o.previous_response_id}' not found.`, "response_id");
  }
  const maxOutput = optInt(o, "max_output_tokens", 1);
  const seed = o.seed === undefined || o.seed === null ? undefined : optInt(o, "seed", -(2 ** 63));
  const temperature = optNumber(o, "temperature", 1);
  const topP = optNumber(o, "top_p", 1);
  const ending: ChatEnding = continuesFinalMessage(o.input) ? "continue-final" : "generation-prompt";
  const prompt = chatPrompt(inputMessages(o), ending, limits.blockSize, seed, promptHashKeys(o, limits));
  if (prompt.count >= limits.maxModelLen) {
    throw badRequest(`The engine prompt length ${prompt.count} exceeds the max_model_len ${limits.maxModelLen}. Please reduce prompt.`, "input");
  }
  const maxTokens = Math.min(maxOutput ?? limits.maxModelLen - prompt.count, limits.maxModelLen - prompt.count);
  const plan = planChoices([prompt], { maxTokens, ignoreEos: o.ignore_eos === true, minTokens: 0, stop: [], includeStopStr: false, n: 1 }, limits)[0]!;
  const forced = forcedToolChoice(o);
  if (forced) answerWithToolCall(plan, forced, maxTokens);
  const id = typeof o.request_id === "string" && o.request_id !== "" ? o.request_id : `resp_${crypto.randomUUID().replaceAll("-", "")}`;
  const echo: Obj = {
    instructions: o.instructions ?? null,
    metadata: o.metadata ?? null,
    parallel_tool_calls: o.parallel_tool_calls ?? true,
    temperature,
    tool_choice: o.tool_choice ?? "auto",
    tools: Array.isArray(o.tools) ? o.tools : [],
    top_p: topP,
    background: false,
    max_output_tokens: maxTokens,
    max_tool_calls: o.max_tool_calls ?? null,
    previous_response_id: null,
    prompt: null,
    reasoning: o.reasoning ?? null,
    service_tier: o.service_tier ?? "auto",
    text: o.text ?? null,
    top_logprobs: null,
    truncation: o.truncation ?? "disabled",
    user: o.user ?? null,
  };
  return { model, stream: o.stream === true, plan, echo, id };
}
