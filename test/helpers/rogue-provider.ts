/**
 * A provider on one base URL serving several models (a hosted API, an engine
 * with several models or LoRA adapters), each of which can be told to
 * misbehave at run time the way hosted APIs and overloaded engines do: never
 * answer, send headers and no first token, cut or stall its stream after N
 * tokens, or fail with 5xx. Answers are deterministic: model M's canonical
 * answer is the words `${tag}0 ${tag}1 …` (one token per word), and a chat
 * continuation (`continue_final_message` after an assistant prefill of k
 * words) goes on with M's own words from position k — what the sim-engine
 * does for one model, here across models, so the text a client should read
 * after a continuation on another model is known exactly. Usage counts one
 * token per word of every message (the prefill included) and per word sent.
 */
import type { Server } from "bun";
import { startRogueEngine } from "./rogue-engine.ts";

export type Behaviour = "ok" | "never-answer" | "no-first-token" | "fail" | { cut: number } | { stall: number };

export interface RogueProvider {
  server: Server<undefined>;
  url: string;
  /** What model `model` does from now on. */
  set(model: string, behaviour: Behaviour): void;
  /** Chat requests seen per model (probes included). */
  seen: Record<string, number>;
  /** Requests of a model's probes (max_tokens 1) seen. */
  probes: Record<string, number>;
  /** Words `from` ≤ i < `to` of `model`'s canonical answer, as the text a client reads. */
  canonical(model: string, from: number, to: number): string;
}

type Message = { role: string; content: unknown };
type ChatBody = { model: string; messages?: Message[]; max_tokens?: number; continue_final_message?: boolean; stream_options?: { include_usage?: boolean } };

const enc = new TextEncoder();
const words = (text: string) => text.split(/\s+/).filter((w) => w !== "").length;

/** `tags`: model name → the short prefix of its words (distinct per model, so the text says who wrote it). */
export function startRogueProvider(tags: Record<string, string>, opts: { outputTokens?: number } = {}): RogueProvider {
  const output = opts.outputTokens ?? 60;
  const behaviours: Record<string, Behaviour> = {};
  const seen: Record<string, number> = {};
  const probes: Record<string, number> = {};
  const word = (model: string, i: number) => `${tags[model] ?? model}${i} `;
  const canonical = (model: string, from: number, to: number) => Array.from({ length: to - from }, (_, i) => word(model, from + i)).join("");

  const server = startRogueEngine(Object.keys(tags), async (req) => {
    const body = (await req.json()) as ChatBody;
    const model = body.model;
    seen[model] = (seen[model] ?? 0) + 1;
    if (body.max_tokens === 1) probes[model] = (probes[model] ?? 0) + 1;
    const b = behaviours[model] ?? "ok";
    if (b === "fail") return Response.json({ error: { message: "overloaded", type: "server_error", code: 503 } }, { status: 503 });
    if (b === "never-answer") return new Promise<Response>((resolve) => req.signal.addEventListener("abort", () => resolve(new Response("", { status: 499 }))));
    const messages = body.messages ?? [];
    const last = messages[messages.length - 1];
    const prefill = body.continue_final_message === true && last?.role === "assistant" && typeof last.content === "string" ? last.content : "";
    const from = words(prefill);
    const total = Math.min(output, from + (body.max_tokens ?? output));
    const prompt = messages.reduce((n, m) => n + (typeof m.content === "string" ? words(m.content) : 0), 0);
    const env = (rest: string) => `data: {"id":"chatcmpl-${model}","object":"chat.completion.chunk","created":1,"model":"${model}",${rest}}\n\n`;
    const events: string[] = [env(`"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]`)];
    for (let i = from; i < total; i++) {
      const finish = i === total - 1 ? `"${total === output ? "stop" : "length"}"` : "null";
      events.push(env(`"choices":[{"index":0,"delta":{"content":"${word(model, i)}"},"finish_reason":${finish}}]`));
    }
    if (body.stream_options?.include_usage)
      events.push(env(`"choices":[],"usage":{"prompt_tokens":${prompt},"completion_tokens":${total - from},"total_tokens":${prompt + total - from}}`));
    events.push("data: [DONE]\n\n");
    // Where the stream stops: after the role chunk and `n` tokens.
    const stopAt = typeof b === "object" ? 1 + ("cut" in b ? b.cut : b.stall) : b === "no-first-token" ? 0 : Infinity;
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        // A comment first, so that the headers go out (Bun sends them with the first body bytes).
        c.enqueue(enc.encode(": rogue\n\n"));
        events.slice(0, stopAt).forEach((e) => c.enqueue(enc.encode(e)));
        if (stopAt >= events.length) return c.close();
        if (typeof b === "object" && "cut" in b) setTimeout(() => c.error(new Error("connection cut")), 5);
        // stall / no-first-token: hold until the gateway gives up on it.
        req.signal.addEventListener("abort", () => {
          try {
            c.close();
          } catch {
            // already closed or errored
          }
        });
      },
    });
    return new Response(stream, { headers: { "content-type": "text/event-stream" } });
  });
  return {
    server,
    url: `http://127.0.0.1:${server.port}`,
    set: (model, behaviour) => (behaviours[model] = behaviour),
    seen,
    probes,
    canonical,
  };
}
