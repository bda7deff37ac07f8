/**
 * An Anthropic Messages API request as a chat completion (and a count_tokens
 * request as vLLM's /tokenize), for an endpoint that does not serve the
 * Messages API: the same conversion vLLM makes in
 * vllm/entrypoints/anthropic/serving.py — system text first, content blocks
 * to chat parts, tool_use blocks to the assistant's tool_calls, tool_result
 * blocks to tool messages, tools to function tools, tool_choice any →
 * "required", stop_sequences → stop — with usage asked for on a stream. Pure.
 */
import type { Route } from "../../metrics/names.ts";
import type { InferenceBody } from "./parse.ts";

type Obj = Record<string, unknown>;

/** Where a route's requests go on an endpoint that does not serve it, translated: the route and path asked of the engine instead. */
export const TRANSLATED_ROUTES: Partial<Record<Route, { route: Route; path: string }>> = {
  messages: { route: "chat", path: "/v1/chat/completions" },
  count_tokens: { route: "tokenize", path: "/tokenize" },
};

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A text block's text ("" for anything else). */
function textOf(block: unknown): string {
  return isObj(block) && block.type === "text" && typeof block.text === "string" ? block.text : "";
}

/** The system prompt: `system` (a string or text blocks), then any system-role messages, joined as vLLM joins them. */
function systemText(body: InferenceBody): string {
  const parts: string[] = [];
  const add = (v: unknown) => {
    if (typeof v === "string") parts.push(v);
    else if (Array.isArray(v)) for (const b of v) parts.push(textOf(b));
  };
  add(body.system);
  for (const m of body.messages as unknown[]) if (isObj(m) && m.role === "system") add(m.content);
  return parts.join("");
}

/** An image block's source as a URL a chat engine takes (a data: URL for base64). */
function imageUrl(source: unknown): string {
  if (!isObj(source)) return "";
  if (source.type === "url") return typeof source.url === "string" ? source.url : "";
  return `data:${typeof source.media_type === "string" ? source.media_type : "image/jpeg"};base64,${typeof source.data === "string" ? source.data : ""}`;
}

/** A tool_result's content as the tool message's text. */
function toolResultText(content: unknown): string {
  if (typeof content === "string") return content;
  return Array.isArray(content) ? content.map(textOf).join("\n") : "";
}

/** One Anthropic message as chat messages: its tool results first (as tool messages), then the message itself when it has content. */
function convertMessage(m: Obj, out: Obj[]): void {
  if (typeof m.content === "string") {
    out.push({ role: m.role, content: m.content });
    return;
  }
  if (!Array.isArray(m.content)) return;
  const parts: Obj[] = [];
  const calls: Obj[] = [];
  for (const b of m.content as unknown[]) {
    if (!isObj(b)) continue;
    switch (b.type) {
      case "text":
        if (typeof b.text === "string" && b.text !== "") parts.push({ type: "text", text: b.text });
        break;
      case "image":
        parts.push({ type: "image_url", image_url: { url: imageUrl(b.source) } });
        break;
      case "tool_use":
        calls.push({ id: b.id, type: "function", function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } });
        break;
      case "tool_result":
        if (m.role === "user") out.push({ role: "tool", tool_call_id: b.tool_use_id ?? "", content: toolResultText(b.content) });
        else parts.push({ type: "text", text: `Tool result: ${toolResultText(b.content)}` });
        break;
      default:
        break; // thinking and redacted_thinking: earlier reasoning is not sent back, as chat templates drop it
    }
  }
  if (parts.length === 0 && calls.length === 0) return;
  const msg: Obj = { role: m.role };
  msg.content = parts.length === 0 ? null : parts.length === 1 ? parts[0]!.text : parts;
  if (calls.length > 0) msg.tool_calls = calls;
  out.push(msg);
}

function chatMessages(body: InferenceBody): Obj[] {
  const out: Obj[] = [];
  const system = systemText(body);
  if (system !== "") out.push({ role: "system", content: system });
  for (const m of body.messages as unknown[]) if (isObj(m) && m.role !== "system") convertMessage(m, out);
  return out;
}

function chatTools(body: InferenceBody): Obj[] | undefined {
  if (!Array.isArray(body.tools)) return undefined;
  return body.tools.filter(isObj).map((t) => ({
    type: "function",
    function: { name: t.name, ...(typeof t.description === "string" ? { description: t.description } : {}), parameters: t.input_schema ?? { type: "object" } },
  }));
}

function chatToolChoice(choice: unknown): unknown {
  if (!isObj(choice)) return undefined;
  switch (choice.type) {
    case "any":
      return "required";
    case "tool":
      return { type: "function", function: { name: choice.name } };
    case "auto":
    case "none":
      return choice.type;
    default:
      return undefined;
  }
}

/** The chat completion request for a Messages request, asking `model`. */
export function messagesToChat(body: InferenceBody, model: string): string {
  const out: Obj = { model, messages: chatMessages(body), max_tokens: body.max_tokens };
  if (Array.isArray(body.stop_sequences) && body.stop_sequences.length > 0) out.stop = body.stop_sequences;
  for (const key of ["temperature", "top_p", "top_k"]) if (typeof body[key] === "number") out[key] = body[key];
  const tools = chatTools(body);
  if (tools !== undefined && tools.length > 0) out.tools = tools;
  const choice = chatToolChoice(body.tool_choice);
  if (choice !== undefined && tools !== undefined && tools.length > 0) out.tool_choice = choice;
  if (body.stream === true) {
    out.stream = true;
    out.stream_options = { include_usage: true };
  }
  return JSON.stringify(out);
}

/** vLLM's /tokenize request (a chat one) for a count_tokens request, asking `model`. */
export function countTokensToTokenize(body: InferenceBody, model: string): string {
  const out: Obj = { model, messages: chatMessages(body) };
  const tools = chatTools(body);
  if (tools !== undefined && tools.length > 0) out.tools = tools;
  return JSON.stringify(out);
}
