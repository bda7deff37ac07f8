/**
 * The sim-engine's reading of an Anthropic Messages API request (POST
 * /v1/messages and /v1/messages/count_tokens), as vLLM's
 * AnthropicMessagesRequest and its conversion to a chat request take it
 * (vllm/entrypoints/anthropic/protocol.py, serving.py): `system` as a string
 * or text blocks, messages whose content is a string or blocks (text,
 * tool_use, tool_result; images and thinking carry no text), `max_tokens`
 * required, `stop_sequences`, sampling, and tools whose `tool_choice`
 * "any" or "tool" forces a call. Pure: body text in, a plan or a
 * SimHttpError out.
 */
import { type ChoicePlan, planChoices } from "../answer-plan.ts";
import { parseJsonObject, type RequestLimits } from "../openai-request.ts";
import { chatPrompt } from "../tokens.ts";
import { badRequest, SimHttpError } from "../vllm-errors.ts";
import { answerWithToolCall, forcedToolChoice } from "./tool-calls.ts";

type Obj = Record<string, unknown>;

interface MessagesRequest {
  model: string;
  stream: boolean;
  plan: ChoicePlan;
  /** The prompt's tokens (usage.input_tokens, count_tokens' answer). */
  promptTokens: number;
}

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The text of `system`: a string, or its text blocks joined (vLLM joins them without a separator). */
function systemText(system: unknown): string {
  if (system === undefined || system === null) return "";
  if (typeof system === "string") return system;
  if (!Array.isArray(system)) throw badRequest("system: Input should be a valid string or a list of content blocks", "system");
  return system.map((b) => (isObj(b) && b.type === "text" && typeof b.text === "string" ? b.text : "")).join("");
}

/** A tool_result's content as text: a string, or its text blocks on lines of their own. */
function toolResultText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((b) => isObj(b) && b.type === "text")
    .map((b) => String((b as Obj).text ?? ""))
    .join("\n");
}

/** The messages as the chat template sees them: tool results become tool messages, tool calls the assistant's text. */
function chatMessages(o: Obj): { role: string; content: string }[] {
  const out: { role: string; content: string }[] = [];
  const system = systemText(o.system);
  if (system !== "") out.push({ role: "system", content: system });
  const messages = o.messages;
  if (!Array.isArray(messages)) throw badRequest("messages: Field required (a list of messages)", "messages");
  if (messages.length === 0) throw badRequest("messages: List should have at least 1 item", "messages");
  messages.forEach((m: unknown, i) => {
    const where = `messages[${i}]`;
    if (!isObj(m)) throw badRequest(`${where}: Input should be a valid dictionary`, "messages");
    if (m.role !== "user" && m.role !== "assistant" && m.role !== "system")
      throw badRequest(`${where}.role: Input should be 'user', 'assistant' or 'system'`, "messages");
    if (typeof m.content === "string") {
      out.push({ role: m.role, content: m.content });
      return;
    }
    if (!Array.isArray(m.content)) throw badRequest(`${where}.content: Input should be a valid string or a list of content blocks`, "messages");
    let text = "";
    for (const [j, b] of m.content.entries()) {
      if (!isObj(b) || typeof b.type !== "string") throw badRequest(`${where}.content[${j}].type: Field required`, "messages");
      switch (b.type) {
        case "text":
          text += typeof b.text === "string" ? b.text : "";
          break;
        case "tool_use":
          text += `[call ${String(b.name)}(${JSON.stringify(b.input ?? {})})]`;
          break;
        case "tool_result":
          out.push({ role: "tool", content: toolResultText(b.content) });
          break;
        case "image":
        case "thinking":
        case "redacted_thinking":
        case "tool_reference":
          break;
        default:
          throw badRequest(`${where}.content[${j}].type: Input should be 'text', 'image', 'tool_use', 'tool_result' or 'thinking'`, "messages");
      }
    }
    if (text !== "" || m.role === "assistant") out.push({ role: m.role, content: text });
  });
  return out;
}

/** The request's tools and tool_choice as a chat request writes them (vLLM's _convert_tools, _convert_tool_choice). */
function chatTools(o: Obj): Obj {
  const tools = o.tools;
  if (tools !== undefined && tools !== null && !Array.isArray(tools)) throw badRequest("tools: Input should be a valid list", "tools");
  const fns = (Array.isArray(tools) ? tools : []).map((t: unknown, i) => {
    if (!isObj(t) || typeof t.name !== "string") throw badRequest(`tools[${i}].name: Field required`, "tools");
    if (!isObj(t.input_schema)) throw badRequest(`tools[${i}].input_schema: Field required`, "tools");
    return { type: "function", function: { name: t.name, parameters: t.input_schema } };
  });
  const c = o.tool_choice;
  let choice: unknown;
  if (c !== undefined && c !== null) {
    if (!isObj(c) || !["auto", "any", "tool", "none"].includes(String(c.type)))
      throw badRequest("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'", "tool_choice");
    if (c.type === "tool" && typeof c.name !== "string") throw badRequest("tool_choice.name is required when type is 'tool'", "tool_choice");
    choice = c.type === "any" ? "required" : c.type === "tool" ? { type: "function", function: { name: c.name } } : c.type;
  }
  return { tools: fns, tool_choice: choice };
}

function optNumber(o: Obj, key: string): void {
  const v = o[key];
  if (v !== undefined && v !== null && typeof v !== "number") throw badRequest(`${key}: Input should be a valid number`, key);
}

function checkModel(o: Obj, limits: RequestLimits): string {
  const model = o.model;
  if (typeof model !== "string" || model === "") throw badRequest("model: Field required", "model");
  if (!limits.models.includes(model) && !limits.adapters?.has(model))
    throw new SimHttpError(404, "NotFoundError", `The model \`${model}\` does not exist.`, "model");
  return model;
}

/** POST /v1/messages/count_tokens: the prompt's tokens, as the chat template renders the request. */
export function countMessageTokens(body: string, limits: RequestLimits): number {
  const o = parseJsonObject(body);
  checkModel(o, limits);
  chatTools(o);
  return chatPrompt(chatMessages(o), "generation-prompt", limits.blockSize, undefined, limits.hashRoot).count;
}

export function parseMessagesRequest(body: string, limits: RequestLimits): MessagesRequest {
  const o = parseJsonObject(body);
  const model = checkModel(o, limits);
  const max = o.max_tokens;
  if (max === undefined || max === null) throw badRequest("max_tokens: Field required", "max_tokens");
  if (typeof max !== "number" || !Number.isInteger(max)) throw badRequest("max_tokens: Input should be a valid integer", "max_tokens");
  if (max <= 0) throw badRequest("max_tokens: Value error, max_tokens must be positive", "max_tokens");
  if (o.stream !== undefined && o.stream !== null && typeof o.stream !== "boolean") throw badRequest("stream: Input should be a valid boolean", "stream");
  for (const key of ["temperature", "top_p", "top_k"]) optNumber(o, key);
  const stop = o.stop_sequences ?? [];
  if (!Array.isArray(stop) || !stop.every((s) => typeof s === "string"))
    throw badRequest("stop_sequences: Input should be a valid list of strings", "stop_sequences");
  const tools = chatTools(o);
  const prompt = chatPrompt(chatMessages(o), "generation-prompt", limits.blockSize, undefined, limits.hashRoot);
  if (prompt.count >= limits.maxModelLen) {
    throw badRequest(`The engine prompt length ${prompt.count} exceeds the max_model_len ${limits.maxModelLen}. Please reduce prompt.`, "messages");
  }
  const maxTokens = Math.min(max, limits.maxModelLen - prompt.count);
  const plan = planChoices([prompt], { maxTokens, ignoreEos: false, minTokens: 0, stop: stop as string[], includeStopStr: false, n: 1 }, limits)[0]!;
  const forced = forcedToolChoice(tools);
  if (forced) answerWithToolCall(plan, forced, maxTokens);
  return { model, stream: o.stream === true, plan, promptTokens: prompt.count };
}
