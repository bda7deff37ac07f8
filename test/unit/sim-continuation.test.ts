/** The sim's text is a function of its context, so an answer continued from position k is the uninterrupted one (issue 13). */
import { describe, expect, test } from "bun:test";
import { parseGenerationRequest } from "../../src/sim/openai-request.ts";
import { readContext, SimOutput, VOCAB } from "../../src/sim/text-model.ts";
import { renderChat, textPrompt } from "../../src/sim/tokens.ts";
import { simErrorOf as err } from "../helpers/sim-http-error.ts";

const limits = { models: ["m"], maxModelLen: 4096, blockSize: 4, outputLen: 40 };

function answerOf(text: string, n: number, seed?: number): string {
  return new SimOutput(textPrompt(text, 4, seed).state).text(n);
}

describe("sim text model", () => {
  test("prompt + the first k tokens of its answer continues with the rest, byte for byte, for every k", () => {
    const prompt = "Write about the history of the city";
    const whole = answerOf(prompt, 30);
    const out = new SimOutput(textPrompt(prompt, 4).state);
    for (let k = 0; k <= 30; k++) {
      const delivered = out.text(k);
      const ctx = readContext(prompt + delivered, undefined);
      expect(ctx.continued).toBeGreaterThanOrEqual(k);
      expect(delivered + new SimOutput(ctx.state).text(30 - k)).toBe(whole);
    }
  });

  test("the continued words count one token each on top of the prompt's own count", () => {
    const chat = renderChat([{ role: "user", content: "Tell me something" }]);
    const p = textPrompt(chat, 4);
    expect(p.continued).toBe(0); // a chat context ends in the template, never in a word
    const delivered = new SimOutput(p.state).text(12);
    const c = textPrompt(chat + delivered, 4);
    expect([c.count, c.continued]).toEqual([p.count + 12, 12]);
    // The prefix cache still finds the original prompt: its ids, then one id per continued word.
    expect(Array.from(c.ids.subarray(0, p.count))).toEqual(Array.from(p.ids));
    expect(c.blockHashes.slice(0, p.blockHashes.length)).toEqual(p.blockHashes);
  });

  test("text that is not the model's own answer is not counted as continued", () => {
    const prompt = "<|user|>\nhi\n<|assistant|>\n";
    const own = new SimOutput(textPrompt(prompt, 4).state);
    // A word the model would not have produced first breaks the run: only what follows it may count.
    const wrong = VOCAB.find((w) => w !== own.tokenText(0))!;
    expect(readContext(prompt + wrong, undefined).continued).toBe(0);
    expect(readContext(prompt + " Sure, here is", undefined).continued).toBe(0);
  });

  test("seed changes the answer; the same seed gives the same answer", () => {
    expect(answerOf("abc", 20, 7)).toBe(answerOf("abc", 20, 7));
    expect(answerOf("abc", 20, 7)).not.toBe(answerOf("abc", 20, 8));
    expect(answerOf("abc", 20, 7)).not.toBe(answerOf("abc", 20));
  });
});

describe("sim continuation requests", () => {
  const messages = [{ role: "user", content: "Tell me a story" }];

  test("chat: continue_final_message continues the assistant prefill; output and max_tokens count new tokens only", () => {
    const base = parseGenerationRequest("chat", JSON.stringify({ model: "m", messages, max_tokens: 25, seed: 3 }), limits);
    const delivered = new SimOutput(base.prompt.state).text(10);
    const body = {
      model: "m",
      messages: [...messages, { role: "assistant", content: delivered }],
      continue_final_message: true,
      add_generation_prompt: false,
      max_tokens: 15,
      seed: 3,
    };
    const cont = parseGenerationRequest("chat", JSON.stringify(body), limits);
    expect([cont.prompt.count, cont.prompt.continued, cont.outputTokens, cont.finishReason]).toEqual([base.prompt.count + 10, 10, 15, "length"]);
    expect(delivered + new SimOutput(cont.prompt.state).text(15)).toBe(new SimOutput(base.prompt.state).text(25));
  });

  test("without max_tokens a continuation stops where the uninterrupted answer stops (--output-len)", () => {
    const base = parseGenerationRequest("completion", JSON.stringify({ model: "m", prompt: "Once upon a midnight dreary" }), limits);
    expect([base.outputTokens, base.finishReason]).toEqual([40, "stop"]);
    const delivered = new SimOutput(base.prompt.state).text(17);
    const cont = parseGenerationRequest("completion", JSON.stringify({ model: "m", prompt: "Once upon a midnight dreary" + delivered }), limits);
    expect([cont.outputTokens, cont.finishReason, cont.prompt.count]).toEqual([23, "stop", base.prompt.count + 17]);
  });

  test("add_generation_prompt: false without a prefill renders no generation prompt; completions ignore the chat flags", () => {
    const a = parseGenerationRequest("chat", JSON.stringify({ model: "m", messages, add_generation_prompt: false }), limits);
    expect(a.prompt.count).toBe(textPrompt(renderChat(messages, "none"), 4).count);
    const c = parseGenerationRequest(
      "completion",
      JSON.stringify({ model: "m", prompt: "x", continue_final_message: true, add_generation_prompt: true }),
      limits,
    );
    expect(c.prompt.count).toBe(1);
  });

  test("bad combinations answer 400 like vLLM", () => {
    const chat = (extra: Record<string, unknown>) => () => parseGenerationRequest("chat", JSON.stringify({ model: "m", messages, ...extra }), limits);
    const both = err(chat({ continue_final_message: true, add_generation_prompt: true }));
    expect([both.status, both.type]).toEqual([400, "BadRequestError"]);
    expect(both.message).toContain("Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
    // add_generation_prompt defaults to true in vLLM: transformers refuses the pair.
    expect(err(chat({ continue_final_message: true })).message).toMatch(/^continue_final_message and add_generation_prompt are not compatible/);
    expect(err(chat({ continue_final_message: "yes", add_generation_prompt: false })).status).toBe(400);
    expect(err(chat({ add_generation_prompt: 1 })).status).toBe(400);
    expect(err(chat({ seed: 1.5 })).status).toBe(400);
    expect(err(chat({ seed: 2 ** 64 })).status).toBe(400);
  });
});
