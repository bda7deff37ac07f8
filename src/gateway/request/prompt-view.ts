/**
 * What the prompt walk (scheduling/prompt-walk.ts: the token estimate and
 * the prefix hashes) reads of a request, per route. Chat, completions and
 * embeddings are read as they are (no copy on the hot path). A Responses API
 * request becomes the chat messages its input renders to (instructions as
 * the system message, items as messages, max_output_tokens as the budget),
 * so a conversation shares its prefix hashes with the same one sent as chat;
 * the scoring, pooling and tokenizer routes are prompt text with no
 * completion budget; a transcription is charged per request only (its
 * audio is not text the gateway can count).
 */
import type { Route } from "../../metrics/names.ts";
import type { InferenceBody } from "./parse.ts";

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function strings(...values: unknown[]): string[] {
  const out: string[] = [];
  for (const v of values) {
    if (typeof v === "string") out.push(v);
    else if (Array.isArray(v)) for (const s of v) if (typeof s === "string") out.push(s);
  }
  return out;
}

/** A Responses input item as the chat message it renders to (content parts keep their text). */
function itemMessage(item: unknown): Obj | undefined {
  if (typeof item === "string") return { role: "user", content: item };
  if (!isObj(item)) return undefined;
  switch (item.type ?? "message") {
    case "message":
      return { role: item.role, content: item.content };
    case "function_call":
      return { role: "assistant", content: typeof item.arguments === "string" ? item.arguments : "" };
    case "function_call_output":
      return { role: "tool", content: typeof item.output === "string" ? item.output : "" };
    default:
      return undefined;
  }
}

/** The chat messages a Responses API request renders to. */
function responsesMessages(body: InferenceBody): Obj[] {
  const messages: Obj[] = [];
  if (typeof body.instructions === "string" && body.instructions !== "") messages.push({ role: "system", content: body.instructions });
  const input = body.input;
  if (typeof input === "string") messages.push({ role: "user", content: input });
  else if (Array.isArray(input)) {
    for (const item of input) {
      const m = itemMessage(item);
      if (m !== undefined) messages.push(m);
    }
  }
  return messages;
}

/** Message contents as plain strings (a pooling or tokenize request given as messages). */
function messageTexts(messages: unknown): string[] {
  if (!Array.isArray(messages)) return [];
  return messages.flatMap((m) =>
    isObj(m) ? strings(m.content, Array.isArray(m.content) ? m.content.map((p: unknown) => (isObj(p) ? p.text : undefined)) : undefined) : [],
  );
}

const NOTHING: Obj = Object.freeze({ input: "" });

/** The body the prompt walk reads for `route`. */
export function promptViewOf(route: Route, body: InferenceBody): unknown {
  switch (route) {
    case "chat":
    case "completions":
    case "embeddings":
      return body;
    case "responses":
      return { messages: responsesMessages(body), max_tokens: body.max_output_tokens };
    case "messages":
    case "count_tokens":
      return {
        messages: body.system === undefined ? body.messages : [{ role: "system", content: body.system }, ...(body.messages as unknown[])],
        max_tokens: body.max_tokens,
      };
    case "tokenize":
    case "pooling":
    case "classify":
      return { input: [...strings(body.prompt, body.input), ...messageTexts(body.messages)] };
    case "score":
      return { input: strings(body.text_1, body.text_2, body.queries, body.documents, body.items) };
    case "rerank":
      return { input: strings(body.query, body.documents) };
    case "detokenize":
    case "transcriptions":
      return NOTHING;
  }
}

/** Routes whose prompt prefix is hashed for affinity: those that generate from a prompt an engine may have cached. */
export function hashesPrefix(route: Route): boolean {
  return route === "chat" || route === "completions" || route === "responses" || route === "messages";
}
