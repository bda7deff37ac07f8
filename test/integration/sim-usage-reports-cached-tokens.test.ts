/**
 * usage.prompt_tokens_details.cached_tokens, as vLLM reports it: only with
 * --enable-prompt-tokens-details and only when the prefix cache served part
 * of the prompt; the number is what the first scheduling found (a chat's
 * second turn includes the first answer's blocks; another cache_salt finds
 * none).
 */
import { afterAll, expect, test } from "bun:test";
import { startLlmgw, stopAll } from "../helpers/processes.ts";

afterAll(stopAll);

const BLOCK = 16;
const SYSTEM = "You are a careful assistant who answers in full sentences. ".repeat(6);

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  prompt_tokens_details: { cached_tokens: number } | null;
}

async function post(url: string, path: string, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

async function chat(
  url: string,
  messages: { role: string; content: string }[],
  extra: Record<string, unknown> = {},
): Promise<{ content: string; usage: Usage }> {
  const res = await post(url, "/v1/chat/completions", { model: "m", messages, max_tokens: 40, ignore_eos: true, ...extra });
  expect(res.status).toBe(200);
  const j = (await res.json()) as { choices: { message: { content: string } }[]; usage: Usage };
  return { content: j.choices[0]!.message.content, usage: j.usage };
}

/** The usage of a streamed chat's final chunk (stream_options.include_usage). */
async function streamedUsage(url: string, messages: { role: string; content: string }[]): Promise<Usage> {
  const res = await post(url, "/v1/chat/completions", { model: "m", messages, max_tokens: 4, stream: true, stream_options: { include_usage: true } });
  const text = await res.text();
  const last = text
    .split("\n\n")
    .filter((e) => e.startsWith("data: {"))
    .map((e) => JSON.parse(e.slice(6)) as { usage?: Usage | null })
    .at(-1)!;
  return last.usage!;
}

const ask = (q: string) => [
  { role: "system", content: SYSTEM },
  { role: "user", content: q },
];

test("without --enable-prompt-tokens-details, prompt_tokens_details stays null even on a hit", async () => {
  const sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "m", "--block-size", String(BLOCK), "--itl-ms", "1"]);
  await chat(sim.url, ask("first?"));
  expect((await chat(sim.url, ask("second?"))).usage.prompt_tokens_details).toBeNull();
});

test("with it: cached tokens on hits only, the first answer's blocks in the second turn, none across salts", async () => {
  const sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "m", "--block-size", String(BLOCK), "--itl-ms", "1", "--enable-prompt-tokens-details"]);
  const cold = await chat(sim.url, ask("first?"));
  // Nothing cached: vLLM leaves the details out (num_cached_tokens 0 is falsy).
  expect(cold.usage.prompt_tokens_details).toBeNull();
  const warm = await chat(sim.url, ask("second?"));
  const shared = Math.floor(SYSTEM.length / 4 / BLOCK) * BLOCK;
  expect(warm.usage.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(shared);
  expect(warm.usage.prompt_tokens_details!.cached_tokens % BLOCK).toBe(0);

  // The second turn of the cold chat: its prompt and its answer's full blocks, but for the last sampled token.
  const turn2 = await chat(sim.url, [...ask("first?"), { role: "assistant", content: cold.content }, { role: "user", content: "Go on." }]);
  const { prompt_tokens: p, completion_tokens: c } = cold.usage;
  expect(turn2.usage.prompt_tokens_details!.cached_tokens).toBe(Math.floor((p + c - 1) / BLOCK) * BLOCK);

  // Streamed, the final usage chunk carries it too.
  expect((await streamedUsage(sim.url, ask("third?"))).prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(shared);

  // A salt isolates: "a" caches, "b" finds nothing of it nor of the unsalted blocks, "a" again hits.
  expect((await chat(sim.url, ask("salted?"), { cache_salt: "a" })).usage.prompt_tokens_details).toBeNull();
  expect((await chat(sim.url, ask("salted?"), { cache_salt: "b" })).usage.prompt_tokens_details).toBeNull();
  expect((await chat(sim.url, ask("salted again?"), { cache_salt: "a" })).usage.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(shared);
  const bad = await post(sim.url, "/v1/chat/completions", { model: "m", messages: ask("x"), cache_salt: "" });
  expect(bad.status).toBe(400);
  expect(((await bad.json()) as { error: { message: string } }).error.message).toContain("cache_salt");

  // Completions report it the same way.
  const res = await post(sim.url, "/v1/completions", { model: "m", prompt: `${SYSTEM}and so`, max_tokens: 2 });
  const again = await post(sim.url, "/v1/completions", { model: "m", prompt: `${SYSTEM}and so`, max_tokens: 2 });
  expect(((await res.json()) as { usage: Usage }).usage.prompt_tokens_details).toBeNull();
  expect(((await again.json()) as { usage: Usage }).usage.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(shared);
});
