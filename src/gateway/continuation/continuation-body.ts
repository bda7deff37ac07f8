/**
 * The request that finishes a broken answer on another replica:
 * which requests can be continued exactly, and the body that continues one —
 * chat: the original messages plus the delivered text as a final assistant
 * message to continue (vLLM's and SGLang's `continue_final_message: true`,
 * `add_generation_prompt: false`); raw completions: prompt + delivered text;
 * the token limits reduced by what was delivered; everything else (stop,
 * sampling parameters, seed) carried over; usage always asked for. Pure.
 */
import type { Route } from "../../metrics/names.ts";

/** Why a request is not continued (a closed set: it labels a metric). */
const NOT_CONTINUABLE_REASONS = [
  "not_chat_or_completions",
  "not_streaming",
  "several_choices",
  "logprobs",
  "tools",
  "structured_output",
  "echo",
  "output_penalties",
  "prompt_not_text",
  "prefill_not_text",
  "no_generation_prompt",
] as const;
export type NotContinuableReason = (typeof NOT_CONTINUABLE_REASONS)[number];

export type Continuability = { ok: true } | { ok: false; reason: NotContinuableReason };

type Body = Readonly<Record<string, unknown>>;

const NO = (reason: NotContinuableReason): Continuability => ({ ok: false, reason });
const YES: Continuability = { ok: true };

function present(v: unknown): boolean {
  return v !== undefined && v !== null && v !== false;
}

function nonEmptyList(v: unknown): boolean {
  return Array.isArray(v) && v.length > 0;
}

/** Guided decoding restarts its grammar at the first new token, so a continuation would leave the schema. */
const GUIDED_KEYS = ["guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs"] as const;

/**
 * Whether a request's answer can be finished by a continuation that is
 * exactly what the engine would have produced. Not: several choices (n,
 * best_of, several prompts: the delivered text interleaves them), logprobs
 * (the client saw logprobs under one tokenisation of the prefix; a prefill
 * re-tokenises it), tool calls and structured output (a partial call or JSON
 * document is not a prefix the grammar can resume), echo (the delivered text
 * includes the prompt), presence/frequency penalties (vLLM applies them to
 * generated tokens only: the prefill would make the engine forget them),
 * prompts or prefills not given as text, and a chat answer generated with no
 * assistant turn opened (add_generation_prompt: false).
 */
export function continuable(body: Body, route: Route): Continuability {
  if (route !== "chat" && route !== "completions") return NO("not_chat_or_completions");
  if (body.stream !== true) return NO("not_streaming");
  if ((typeof body.n === "number" && body.n > 1) || (typeof body.best_of === "number" && body.best_of > 1)) return NO("several_choices");
  if (present(body.logprobs) || present(body.top_logprobs) || present(body.prompt_logprobs)) return NO("logprobs");
  if (present(body.echo)) return NO("echo");
  if (
    (typeof body.presence_penalty === "number" && body.presence_penalty !== 0) ||
    (typeof body.frequency_penalty === "number" && body.frequency_penalty !== 0)
  ) {
    return NO("output_penalties");
  }
  if (GUIDED_KEYS.some((k) => present(body[k]))) return NO("structured_output");
  const format = body.response_format;
  if (typeof format === "object" && format !== null && (format as Body).type !== "text") return NO("structured_output");
  if (route === "completions") {
    const p = body.prompt;
    if (typeof p === "string" || (Array.isArray(p) && p.length === 1 && typeof p[0] === "string")) return YES;
    return Array.isArray(p) && p.length > 1 && p.every((x) => typeof x === "string") ? NO("several_choices") : NO("prompt_not_text");
  }
  if (nonEmptyList(body.tools) && body.tool_choice !== "none") return NO("tools");
  if (nonEmptyList(body.functions) && body.function_call !== "none") return NO("tools");
  // Generated straight after the last message, with no assistant turn opened: a chat prefill cannot express that context.
  if (body.add_generation_prompt === false && body.continue_final_message !== true) return NO("no_generation_prompt");
  if (body.continue_final_message === true) {
    // The client's own prefill goes on with the delivered text: it must be text to append to.
    const messages = body.messages;
    const last = Array.isArray(messages) ? (messages[messages.length - 1] as Body | undefined) : undefined;
    if (typeof last?.content !== "string") return NO("prefill_not_text");
  }
  return YES;
}

/** A token limit less what was delivered; undefined when the limit is absent, "spent" when nothing is left. */
function reduced(v: unknown, delivered: number): number | undefined | "spent" {
  if (typeof v !== "number") return undefined;
  const left = v - delivered;
  return left >= 1 ? left : "spent";
}

/**
 * The JSON body that continues `original` after `deliveredText`
 * (`deliveredTokens` tokens) reached the client, for `model` (the original's,
 * or a fallback's). undefined when the token limit is already spent (nothing
 * is left to generate). Call only for a request `continuable()` accepted.
 */
export function continuationBody(original: Body, route: Route, deliveredText: string, deliveredTokens: number, model?: string): string | undefined {
  const out: Record<string, unknown> = { ...original, model: model ?? original.model, stream: true };
  out.stream_options = {
    ...(typeof original.stream_options === "object" && original.stream_options !== null ? original.stream_options : {}),
    include_usage: true,
  };
  for (const key of ["max_tokens", "max_completion_tokens"] as const) {
    const left = reduced(original[key], deliveredTokens);
    if (left === "spent") return undefined;
    if (left !== undefined) out[key] = left;
  }
  // vLLM's min_tokens: the delivered tokens already count toward it.
  if (typeof original.min_tokens === "number") out.min_tokens = Math.max(0, original.min_tokens - deliveredTokens);
  // Nothing but a role delta went out: the original request is its own exact continuation.
  if (deliveredText === "" && deliveredTokens === 0) return JSON.stringify(out);
  if (route === "completions") {
    const p = original.prompt;
    out.prompt = Array.isArray(p) ? [`${String(p[0])}${deliveredText}`] : `${String(p)}${deliveredText}`;
    return JSON.stringify(out);
  }
  const messages = Array.isArray(original.messages) ? original.messages : [];
  if (original.continue_final_message === true && messages.length > 0) {
    const last = messages[messages.length - 1] as Body;
    out.messages = [...messages.slice(0, -1), { ...last, content: `${String(last.content)}${deliveredText}` }];
  } else {
    out.messages = [...messages, { role: "assistant", content: deliveredText }];
  }
  out.continue_final_message = true;
  out.add_generation_prompt = false;
  return JSON.stringify(out);
}
