/**
 * Tool calls as vLLM produces them when a request offers `tools` and
 * `tool_choice` forces one: `"required"` (vLLM constrains the output to a
 * JSON list of calls and its parser streams them, finish_reason
 * "tool_calls") or a named function (vLLM streams the constrained
 * arguments as deltas of one call, finish_reason what the engine reported:
 * "stop"), both in vllm/entrypoints/openai/chat_completion/serving.py. The
 * sim's "model" fills the function's JSON-schema parameters from its own
 * words, so the arguments are valid JSON, deterministic for a prompt, and
 * arrive in pieces of about a token (four characters) each. `auto` and
 * `none` answer with text (a model that chose not to call, or vLLM without
 * a tool parser). Pure: parsing, argument generation, chunk encoding.
 */
import type { ChoicePlan } from "../answer-plan.ts";
import { SimOutput } from "../text-model.ts";
import { badRequest } from "../vllm-errors.ts";
import type { ToolCallPlan } from "./tool-call-plan.ts";

type Obj = Record<string, unknown>;

/** A forced call: the function and why it was forced. */
interface ToolChoice {
  name: string;
  parameters: unknown;
  /** vLLM's finish_reason for the call: "tool_calls" when required, the engine's ("stop") for a named function. */
  finish: "tool_calls" | "stop";
}

/** Characters of arguments per streamed piece (a token, near enough). */
const PIECE_CHARS = 4;

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A tool's name and parameters, in chat's nested form (`{type, function:{name, parameters}}`) or the Responses API's flat one. */
function toolFunction(tool: unknown, i: number): { name: string; parameters: unknown } | undefined {
  if (!isObj(tool)) throw badRequest(`tools[${i}]: Input should be a valid dictionary`, "tools");
  if (tool.type !== "function") return undefined; // built-in tools (web_search …): the sim has none to call
  const fn = isObj(tool.function) ? tool.function : tool;
  if (typeof fn.name !== "string" || fn.name === "") throw badRequest(`tools[${i}].function.name: Field required`, "tools");
  return { name: fn.name, parameters: fn.parameters };
}

/** The named function of a tool_choice object (`{type:"function", function:{name}}` in chat, `{type:"function", name}` in Responses). */
function namedChoice(choice: Obj): string {
  const fn = isObj(choice.function) ? choice.function : choice;
  if (choice.type !== "function" || typeof fn.name !== "string")
    throw badRequest("tool_choice: expected 'none', 'auto', 'required' or a named function", "tool_choice");
  return fn.name;
}

/**
 * The call a request forces, or undefined when it answers with text. Errors
 * as vLLM's request validation words them (ChatCompletionRequest
 * check_tool_usage).
 */
export function forcedToolChoice(o: Obj): ToolChoice | undefined {
  const tools = o.tools;
  const choice = o.tool_choice;
  if (tools !== undefined && tools !== null && !Array.isArray(tools)) throw badRequest("tools: Input should be a valid list", "tools");
  const fns = (Array.isArray(tools) ? tools : []).map(toolFunction).filter((f) => f !== undefined);
  if (choice === undefined || choice === null || choice === "auto" || choice === "none") return undefined;
  if (choice === "required") {
    if (fns.length === 0) throw badRequest("When using `tool_choice`, `tools` must be set.", "tool_choice");
    // The model picks one: the sim's pick is a function of the request (its tool list), so it is the same every time.
    return { ...fns[0]!, finish: "tool_calls" };
  }
  if (!isObj(choice)) throw badRequest("tool_choice: expected 'none', 'auto', 'required' or a named function", "tool_choice");
  const name = namedChoice(choice);
  const fn = fns.find((f) => f.name === name);
  if (fn === undefined) throw badRequest(`Tool '${name}' has not been passed in \`tools\`.`, "tool_choice");
  return { ...fn, finish: "stop" };
}

/** A value for one JSON-schema node, drawn from the model's words. */
function valueFor(schema: unknown, words: () => string, depth: number): unknown {
  const s = isObj(schema) ? schema : {};
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[words().length % s.enum.length];
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== "null") : s.type;
  switch (type) {
    case "integer":
    case "number":
      return words().length;
    case "boolean":
      return words().length % 2 === 0;
    case "array":
      return depth > 3 ? [] : [valueFor(s.items, words, depth + 1)];
    case "object":
      return depth > 3 ? {} : objectFor(s, words, depth + 1);
    case "null":
      return null;
    default:
      return `${words()}${words()}`.trim();
  }
}

function objectFor(schema: Obj, words: () => string, depth: number): Obj {
  const out: Obj = {};
  const props = isObj(schema.properties) ? schema.properties : {};
  for (const [key, sub] of Object.entries(props)) out[key] = valueFor(sub, words, depth);
  return out;
}

/** The arguments the sim's model writes for a function: a JSON object filling its parameters' properties, deterministic in `state`. */
export function toolArguments(parameters: unknown, state: number): string {
  const out = new SimOutput(state);
  let i = 0;
  const words = () => out.tokenText(i++);
  return JSON.stringify(isObj(parameters) ? objectFor(parameters, words, 0) : {});
}

/** Split arguments into the pieces they stream in. */
function argumentPieces(args: string): string[] {
  const pieces: string[] = [];
  for (let i = 0; i < args.length; i += PIECE_CHARS) pieces.push(args.slice(i, i + PIECE_CHARS));
  return pieces.length > 0 ? pieces : [""];
}

function hexId(): string {
  return crypto.randomUUID().replaceAll("-", "");
}

/** One choice's call, for the model state the choice follows from. */
function planToolCall(choice: ToolChoice, state: number): ToolCallPlan {
  // vLLM's make_tool_call_id ("random"): chatcmpl-tool-<uuid hex>; the Responses API's call ids are call_<uuid>.
  return {
    id: `chatcmpl-tool-${hexId()}`,
    itemId: `fc_${hexId()}`,
    name: choice.name,
    pieces: argumentPieces(toolArguments(choice.parameters, state)),
    finish: choice.finish,
  };
}

/** The chat delta of token `index` of a call: the first names the function (id, type, name), later ones carry arguments only (vLLM's DeltaToolCall, unset fields left out). */
export function toolCallDelta(plan: ToolCallPlan, index: number): string {
  const args = JSON.stringify(plan.pieces[index] ?? "");
  if (index === 0)
    return `{"tool_calls":[{"id":"${plan.id}","type":"function","index":0,"function":{"name":${JSON.stringify(plan.name)},"arguments":${args}}}]}`;
  return `{"tool_calls":[{"index":0,"function":{"arguments":${args}}}]}`;
}

/** The arguments of the first `tokens` pieces (a call cut by max_tokens has truncated arguments, as vLLM's would). */
export function argumentsText(plan: ToolCallPlan, tokens: number): string {
  return plan.pieces.slice(0, tokens).join("");
}

/** Make a planned choice answer with the forced call: as many tokens as its arguments have pieces, fewer when max_tokens cuts them (finish "length"). */
export function answerWithToolCall(plan: ChoicePlan, choice: ToolChoice, maxTokens: number | undefined): void {
  const call = planToolCall(choice, plan.state);
  const tokens = Math.min(call.pieces.length, maxTokens ?? call.pieces.length);
  plan.tool = call;
  plan.outputTokens = Math.max(1, tokens);
  plan.finishReason = tokens < call.pieces.length ? "length" : "stop";
  plan.stopReason = null;
  delete plan.texts;
}
