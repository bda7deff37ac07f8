/**
 * A real sim-engine honours continue_final_message / add_generation_prompt
 * and the raw-prompt equivalent: the continued answer is the rest of the
 * uninterrupted one, its usage counts the prefill as prompt, its prefill
 * time covers the continued text, and bad combinations are vLLM's 400s.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type Sim, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";

let sim: Sim;
beforeAll(async () => {
  sim = await startSim(["--model", "m", "--itl-ms", "1", "--output-len", "40"]);
});
afterAll(stopAll);

interface Answer {
  text: string;
  finish: string;
  usage: { prompt_tokens: number; completion_tokens: number };
}

async function post(path: string, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${sim.api}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

async function answer(path: string, body: Record<string, unknown>): Promise<Answer> {
  const res = await post(path, body);
  expect(res.status).toBe(200);
  const j = (await res.json()) as { choices: { message?: { content: string }; text?: string; finish_reason: string }[]; usage: Answer["usage"] };
  const c = j.choices[0]!;
  return {
    text: c.message?.content ?? c.text!,
    finish: c.finish_reason,
    usage: { prompt_tokens: j.usage.prompt_tokens, completion_tokens: j.usage.completion_tokens },
  };
}

/** The first k tokens of an answer (each sim token is one space-led word). */
function firstTokens(text: string, k: number): string {
  return text.split(/(?= )/).slice(0, k).join("");
}

const messages = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Tell me about the city" },
];

/** Read until the first `data:` event: the stream opens with a comment that flushes the headers. */
async function readFirstData(reader: { read(): Promise<{ value?: Uint8Array; done: boolean }> }): Promise<void> {
  let seen = "";
  const dec = new TextDecoder();
  while (!seen.includes("data: ")) {
    const { value, done } = await reader.read();
    if (done) return;
    seen += dec.decode(value, { stream: true });
  }
}

describe("sim-engine continuation", () => {
  test("chat prefill with continue_final_message continues the answer exactly; usage counts the prefill as prompt", async () => {
    const whole = await answer("/v1/chat/completions", { model: "m", messages, max_tokens: 30, seed: 11 });
    expect([whole.finish, whole.usage.completion_tokens]).toEqual(["length", 30]);
    const head = firstTokens(whole.text, 12);
    const rest = await answer("/v1/chat/completions", {
      model: "m",
      messages: [...messages, { role: "assistant", content: head }],
      continue_final_message: true,
      add_generation_prompt: false,
      max_tokens: 18,
      seed: 11,
    });
    expect(head + rest.text).toBe(whole.text);
    expect(rest).toMatchObject({ finish: "length", usage: { prompt_tokens: whole.usage.prompt_tokens + 12, completion_tokens: 18 } });
    // Another seed is another answer.
    expect((await answer("/v1/chat/completions", { model: "m", messages, max_tokens: 30, seed: 12 })).text).not.toBe(whole.text);
  });

  test("raw prompt + delivered text continues a completion, and stops where the answer stops (--output-len)", async () => {
    const whole = await answer("/v1/completions", { model: "m", prompt: "Once upon a midnight dreary" });
    expect([whole.finish, whole.usage.completion_tokens]).toEqual(["stop", 40]);
    const head = firstTokens(whole.text, 25);
    const rest = await answer("/v1/completions", { model: "m", prompt: `Once upon a midnight dreary${head}` });
    expect(head + rest.text).toBe(whole.text);
    expect(rest).toMatchObject({ finish: "stop", usage: { prompt_tokens: whole.usage.prompt_tokens + 25, completion_tokens: 15 } });
  });

  test("the prefill time covers the continued text", async () => {
    await sim.configure({ prefill_ms_per_token: 2, prefill_overhead_ms: 0 });
    try {
      const ttft = async (body: Record<string, unknown>) => {
        const t0 = performance.now();
        const res = await post("/v1/chat/completions", { ...body, stream: true, max_tokens: 1 });
        const reader = res.body!.getReader();
        await readFirstData(reader);
        const ms = performance.now() - t0;
        await reader.cancel();
        return ms;
      };
      const whole = await answer("/v1/chat/completions", { model: "m", messages: [{ role: "user", content: "go" }], max_tokens: 150, ignore_eos: true });
      expect(whole.usage.completion_tokens).toBe(150);
      const fresh = await ttft({ model: "m", messages: [{ role: "user", content: "go" }] });
      // The whole answer's blocks are cached (vLLM caches generated tokens' blocks too): forget them first
      // (a reset is refused while the cancelled request still holds blocks, so try until the cache is empty).
      for (let i = 0; i < 100; i++) {
        expect((await post("/reset_prefix_cache", {})).status).toBe(200);
        const state = (await (await fetch(`${sim.api}/sim/state`)).json()) as { prefix_cache: { cached_blocks: number } };
        if (state.prefix_cache.cached_blocks === 0) break;
        await Bun.sleep(20);
      }
      const continued = await ttft({
        model: "m",
        messages: [
          { role: "user", content: "go" },
          { role: "assistant", content: whole.text },
        ],
        continue_final_message: true,
        add_generation_prompt: false,
      });
      // 150 continued tokens at 2 ms each, none of them in the prefix cache.
      expect(continued - fresh).toBeGreaterThan(150 * 2 * 0.8);
    } finally {
      await sim.configure({ prefill_ms_per_token: 0.05, prefill_overhead_ms: 5 });
    }
  });

  test("bad combinations are vLLM's 400s", async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ continue_final_message: true, add_generation_prompt: true }, /Cannot set both `continue_final_message` and `add_generation_prompt` to True/],
      [{ continue_final_message: true }, /continue_final_message and add_generation_prompt are not compatible/],
      [{ continue_final_message: "yes", add_generation_prompt: false }, /continue_final_message/],
      [{ seed: "7" }, /seed/],
    ];
    for (const [extra, message] of cases) {
      const res = await post("/v1/chat/completions", { model: "m", messages, ...extra });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: { message: string; type: string; code: number } };
      expect(body.error).toMatchObject({ type: "BadRequestError", code: 400 });
      expect(body.error.message).toMatch(message);
    }
  });
});
