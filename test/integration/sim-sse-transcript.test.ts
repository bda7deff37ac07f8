/** The sim-engine's streams and responses match vLLM's wire format field for field (and key order). */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type Started, startLlmgw, stopAll } from "../helpers/processes.ts";

let sim: Started;
beforeAll(async () => {
  // --max-model-len and --output-len restated: the defaults now follow the profile (Llama-3.1-8B: 131072) and a length distribution.
  sim = await startLlmgw([
    "sim-engine",
    "--port",
    "0",
    "--model",
    "sim-a",
    "--model",
    "sim-b",
    "--itl-ms",
    "5",
    "--max-model-len",
    "8192",
    "--output-len",
    "32",
  ]);
});
afterAll(stopAll);

async function post(path: string, body: unknown): Promise<Response> {
  return fetch(`${sim.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

/** Split an SSE body into its `data:` payloads, checking the framing as we go (after the comment that flushes the headers). */
function events(text: string): string[] {
  expect(text.startsWith(": \n\n")).toBe(true);
  expect(text.endsWith("\n\n")).toBe(true);
  return text
    .slice(4, -2)
    .split("\n\n")
    .map((e) => {
      expect(e.startsWith("data: ")).toBe(true);
      return e.slice(6);
    });
}

describe("sim-engine SSE transcript", () => {
  test("chat stream with include_usage: role chunk, one chunk per token, finish chunk, usage chunk, [DONE]", async () => {
    const res = await post("/v1/chat/completions", {
      model: "sim-b",
      messages: [{ role: "user", content: "Say hi" }],
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const ev = events(await res.text());
    expect(ev.length).toBe(1 + 4 + 1 + 1);
    expect(ev.at(-1)).toBe("[DONE]");
    const objs = ev.slice(0, -1).map((e) => JSON.parse(e) as { id: string; created: number; choices: { delta: { content: string } }[] });
    const { id, created } = objs[0]!;
    expect(id).toMatch(/^chatcmpl-[0-9a-f]{32}$/);
    const head = { id, object: "chat.completion.chunk", created, model: "sim-b" };
    // Byte-exact against the objects in vLLM's key order (JSON.stringify keeps insertion order).
    expect(ev[0]).toBe(
      JSON.stringify({ ...head, choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }], usage: null }),
    );
    for (let i = 1; i <= 3; i++) {
      const content = objs[i]!.choices[0]!.delta.content;
      expect(content.length).toBeGreaterThan(0);
      expect(ev[i]).toBe(JSON.stringify({ ...head, choices: [{ index: 0, delta: { content }, logprobs: null, finish_reason: null }], usage: null }));
    }
    const lastContent = objs[4]!.choices[0]!.delta.content;
    expect(ev[4]).toBe(
      JSON.stringify({
        ...head,
        choices: [{ index: 0, delta: { content: lastContent }, logprobs: null, finish_reason: "length", stop_reason: null }],
        usage: null,
      }),
    );
    // Prompt: "<|user|>\nSay hi\n<|assistant|>\n" = 30 chars = 8 tokens.
    expect(ev[5]).toBe(JSON.stringify({ ...head, choices: [], usage: { prompt_tokens: 8, total_tokens: 12, completion_tokens: 4 } }));
  });

  test("chat stream without stream_options has no usage field and ends with finish_reason stop at --output-len", async () => {
    const res = await post("/v1/chat/completions", { model: "sim-a", messages: [{ role: "user", content: "x" }], stream: true });
    const ev = events(await res.text());
    expect(ev.length).toBe(1 + 32 + 1);
    const objs = ev.slice(0, -1).map((e) => JSON.parse(e) as Record<string, unknown> & { choices: { finish_reason: string | null }[] });
    for (const o of objs) expect("usage" in o).toBe(false);
    expect(objs.at(-1)!.choices[0]!.finish_reason).toBe("stop");
    expect(objs.slice(0, -1).every((o) => o.choices[0]!.finish_reason === null)).toBe(true);
    // Same id, created and model in every chunk.
    expect(new Set(objs.map((o) => `${String(o.id)}|${String(o.created)}|${String(o.model)}`)).size).toBe(1);
  });

  test("completions stream: text_completion chunks, cmpl- id, usage chunk and [DONE]", async () => {
    const res = await post("/v1/completions", {
      model: "sim-a",
      prompt: "Once upon a time",
      max_tokens: 3,
      stream: true,
      stream_options: { include_usage: true },
    });
    const ev = events(await res.text());
    expect(ev.length).toBe(3 + 1 + 1);
    const first = JSON.parse(ev[0]!) as { id: string; created: number; choices: { text: string }[] };
    expect(first.id).toMatch(/^cmpl-[0-9a-f]{32}$/);
    const head = { id: first.id, object: "text_completion", created: first.created, model: "sim-a" };
    expect(ev[0]).toBe(
      JSON.stringify({ ...head, choices: [{ index: 0, text: first.choices[0]!.text, logprobs: null, finish_reason: null, stop_reason: null }], usage: null }),
    );
    const last = JSON.parse(ev[2]!) as { choices: { text: string }[] };
    expect(ev[2]).toBe(
      JSON.stringify({
        ...head,
        choices: [{ index: 0, text: last.choices[0]!.text, logprobs: null, finish_reason: "length", stop_reason: null }],
        usage: null,
      }),
    );
    expect(ev[3]).toBe(JSON.stringify({ ...head, choices: [], usage: { prompt_tokens: 4, total_tokens: 7, completion_tokens: 3 } }));
    expect(ev[4]).toBe("[DONE]");
  });

  test("non-stream chat and completion responses have vLLM's fields in order, with usage; text equals the streamed text", async () => {
    const chatBody = { model: "sim-a", messages: [{ role: "user", content: "Say hi" }], max_tokens: 5 };
    const res = await post("/v1/chat/completions", chatBody);
    expect(res.headers.get("content-type")).toBe("application/json");
    const chat = (await res.json()) as Record<string, unknown> & { choices: { message: Record<string, unknown> }[]; usage: Record<string, unknown> };
    expect(Object.keys(chat)).toEqual([
      "id",
      "object",
      "created",
      "model",
      "choices",
      "service_tier",
      "system_fingerprint",
      "usage",
      "prompt_logprobs",
      "kv_transfer_params",
    ]);
    expect(chat.object).toBe("chat.completion");
    expect(Object.keys(chat.choices[0]!)).toEqual(["index", "message", "logprobs", "finish_reason", "stop_reason"]);
    expect(Object.keys(chat.choices[0]!.message)).toEqual([
      "role",
      "content",
      "refusal",
      "annotations",
      "audio",
      "function_call",
      "tool_calls",
      "reasoning_content",
    ]);
    expect(chat.usage).toEqual({ prompt_tokens: 8, total_tokens: 13, completion_tokens: 5, prompt_tokens_details: null });
    const streamed = events(await (await post("/v1/chat/completions", { ...chatBody, stream: true })).text())
      .slice(1, -1)
      .map((e) => (JSON.parse(e) as { choices: { delta: { content: string } }[] }).choices[0]!.delta.content)
      .join("");
    expect(chat.choices[0]!.message.content).toBe(streamed);

    const comp = (await (await post("/v1/completions", { model: "sim-b", prompt: "abc", max_tokens: 2 })).json()) as Record<string, unknown> & {
      choices: Record<string, unknown>[];
    };
    expect(Object.keys(comp)).toEqual(["id", "object", "created", "model", "choices", "usage", "kv_transfer_params"]);
    expect(Object.keys(comp.choices[0]!)).toEqual(["index", "text", "logprobs", "finish_reason", "stop_reason", "prompt_logprobs"]);
    expect(comp.choices[0]!.finish_reason).toBe("length");
  });

  test("/v1/models and /v1/embeddings in vLLM's shape", async () => {
    const models = (await (await fetch(`${sim.url}/v1/models`)).json()) as { object: string; data: Record<string, unknown>[] };
    expect(models.object).toBe("list");
    expect(models.data.map((m) => m.id)).toEqual(["sim-a", "sim-b"]);
    expect(models.data[0]).toMatchObject({ object: "model", owned_by: "vllm", root: "sim-a", parent: null, max_model_len: 8192 });
    const emb = async (input: unknown) =>
      (await (await post("/v1/embeddings", { model: "sim-a", input })).json()) as {
        object: string;
        data: { index: number; object: string; embedding: number[] }[];
        usage: Record<string, number>;
      };
    const a = await emb(["hello world", "other"]);
    expect(a.object).toBe("list");
    expect(a.data.map((d) => [d.index, d.object])).toEqual([
      [0, "embedding"],
      [1, "embedding"],
    ]);
    expect(a.usage.prompt_tokens).toBe(3 + 2);
    expect((await emb("hello world")).data[0]!.embedding).toEqual(a.data[0]!.embedding);
  });
});
