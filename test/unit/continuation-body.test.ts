/** Which requests a continuation can finish exactly, and the body that continues one (issue 13). */
import { describe, expect, test } from "bun:test";
import { continuable, continuationBody, type NotContinuableReason } from "../../src/gateway/continuation/continuation-body.ts";

const chat = {
  model: "m",
  messages: [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Tell me a story" },
  ],
  stream: true,
  max_tokens: 100,
  temperature: 0.7,
  top_p: 0.9,
  seed: 42,
  stop: ["\n\n", "THE END"],
  user: "u1",
};
const completion = {
  model: "m",
  prompt: "Once upon a time",
  stream: true,
  max_completion_tokens: 50,
  stream_options: { include_usage: false, continuous_usage_stats: true },
};

function parsed(body: string | undefined): Record<string, unknown> {
  expect(body).toBeDefined();
  return JSON.parse(body!) as Record<string, unknown>;
}

describe("continuable", () => {
  test("plain chat and completion streams can be continued", () => {
    expect(continuable(chat, "chat")).toEqual({ ok: true });
    expect(continuable(completion, "completions")).toEqual({ ok: true });
    expect(continuable({ ...completion, prompt: ["one prompt"] }, "completions")).toEqual({ ok: true });
    expect(
      continuable({ ...chat, tools: [{ type: "function" }], tool_choice: "none", logprobs: false, n: 1, response_format: { type: "text" } }, "chat"),
    ).toEqual({ ok: true });
    expect(
      continuable(
        { ...chat, messages: [...chat.messages, { role: "assistant", content: "Once" }], continue_final_message: true, add_generation_prompt: false },
        "chat",
      ),
    ).toEqual({ ok: true });
  });

  test("what cannot be continued exactly says why", () => {
    const cases: [Record<string, unknown>, "chat" | "completions" | "embeddings", NotContinuableReason][] = [
      [{ model: "m", input: "x" }, "embeddings", "not_chat_or_completions"],
      [{ ...chat, stream: false }, "chat", "not_streaming"],
      [{ ...chat, n: 2 }, "chat", "several_choices"],
      [{ ...completion, best_of: 3 }, "completions", "several_choices"],
      [{ ...completion, prompt: ["a", "b"] }, "completions", "several_choices"],
      [{ ...chat, logprobs: true, top_logprobs: 2 }, "chat", "logprobs"],
      [{ ...completion, logprobs: 0 }, "completions", "logprobs"],
      [{ ...chat, tools: [{ type: "function", function: { name: "f" } }] }, "chat", "tools"],
      [{ ...chat, functions: [{ name: "f" }] }, "chat", "tools"],
      [{ ...chat, response_format: { type: "json_object" } }, "chat", "structured_output"],
      [{ ...completion, guided_regex: "a+" }, "completions", "structured_output"],
      [{ ...completion, echo: true }, "completions", "echo"],
      [{ ...chat, presence_penalty: 0.5 }, "chat", "output_penalties"],
      [{ ...completion, prompt: [1, 2, 3] }, "completions", "prompt_not_text"],
      [
        { ...chat, messages: [{ role: "assistant", content: [{ type: "text", text: "x" }] }], continue_final_message: true, add_generation_prompt: false },
        "chat",
        "prefill_not_text",
      ],
      [{ ...chat, add_generation_prompt: false }, "chat", "no_generation_prompt"],
    ];
    for (const [body, route, reason] of cases) expect({ route, answer: continuable(body, route) }).toEqual({ route, answer: { ok: false, reason } });
  });
});

describe("continuationBody", () => {
  test("chat: the delivered text becomes a final assistant message to continue; limits reduced, the rest carried over", () => {
    const b = parsed(continuationBody(chat, "chat", " Once upon a", 3));
    expect(b.messages).toEqual([...chat.messages, { role: "assistant", content: " Once upon a" }]);
    expect([b.continue_final_message, b.add_generation_prompt, b.max_tokens]).toEqual([true, false, 97]);
    expect([b.temperature, b.top_p, b.seed, b.stop, b.user, b.model, b.stream]).toEqual([0.7, 0.9, 42, ["\n\n", "THE END"], "u1", "m", true]);
    expect(b.stream_options).toEqual({ include_usage: true });
    expect(parsed(continuationBody(chat, "chat", "x", 1, "fallback")).model).toBe("fallback");
  });

  test("chat with the client's own prefill: the delivered text extends that message", () => {
    const own = { ...chat, messages: [...chat.messages, { role: "assistant", content: "Once" }], continue_final_message: true, add_generation_prompt: false };
    const b = parsed(continuationBody(own, "chat", " upon a time", 3));
    expect(b.messages).toEqual([...chat.messages, { role: "assistant", content: "Once upon a time" }]);
  });

  test("completions: prompt + delivered text; max_completion_tokens and min_tokens reduced; stream_options kept with usage on", () => {
    const b = parsed(continuationBody({ ...completion, min_tokens: 5 }, "completions", " there was", 2));
    expect([b.prompt, b.max_completion_tokens, b.min_tokens]).toEqual(["Once upon a time there was", 48, 3]);
    expect(b.stream_options).toEqual({ include_usage: true, continuous_usage_stats: true });
    expect(parsed(continuationBody({ ...completion, prompt: ["Once"] }, "completions", " more", 1)).prompt).toEqual(["Once more"]);
  });

  test("nothing delivered but the role: the original request itself, with usage on", () => {
    const b = parsed(continuationBody(chat, "chat", "", 0));
    expect(b.messages).toEqual(chat.messages);
    expect([b.continue_final_message, b.max_tokens]).toEqual([undefined, 100]);
    expect(b.stream_options).toEqual({ include_usage: true });
  });

  test("a spent token limit leaves nothing to continue; text with quotes and newlines survives JSON", () => {
    expect(continuationBody(chat, "chat", "x", 100)).toBeUndefined();
    expect(continuationBody(completion, "completions", "x", 60)).toBeUndefined();
    const tricky = ' "quoted"\n\tcafé 🚀 \\ end';
    expect((parsed(continuationBody(completion, "completions", tricky, 9)).prompt as string).endsWith(tricky)).toBe(true);
  });
});
