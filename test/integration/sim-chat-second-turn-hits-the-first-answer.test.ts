/** A served sim caches the blocks its answers fill: a chat's second turn, carrying the first answer, hits them. */
import { afterAll, expect, test } from "bun:test";
import { parsePrometheusText } from "../../src/engines/prom-text.ts";
import { startLlmgw, stopAll } from "../helpers/processes.ts";

afterAll(stopAll);

const BLOCK = 16;

async function prefixHits(url: string): Promise<number> {
  const parsed = parsePrometheusText(await (await fetch(`${url}/metrics`)).text());
  return parsed.samples.filter((s) => s.name === "vllm:prefix_cache_hits_total").reduce((a, s) => a + s.value, 0);
}

interface ChatAnswer {
  choices: { message: { content: string } }[];
  usage: { prompt_tokens: number; completion_tokens: number };
}

async function chat(url: string, messages: { role: string; content: string }[], maxTokens: number): Promise<ChatAnswer> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", messages, max_tokens: maxTokens, ignore_eos: true }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as ChatAnswer;
}

test("a chat's second turn hits the blocks of the first turn's answer", async () => {
  const sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "m", "--block-size", String(BLOCK), "--itl-ms", "1"]);
  const first = [{ role: "user", content: "Say something about prefix caches, at some length, please." }];
  const one = await chat(sim.url, first, 48);
  const hits0 = await prefixHits(sim.url);
  const answer = one.choices[0]!.message.content;
  await chat(sim.url, [...first, { role: "assistant", content: answer }, { role: "user", content: "Go on." }], 4);
  const hit = (await prefixHits(sim.url)) - hits0;
  // Every full block of the first turn's prompt and answer, but for the answer's last token (sampled, never computed).
  const { prompt_tokens: p, completion_tokens: c } = one.usage;
  expect(hit).toBe(Math.floor((p + c - 1) / BLOCK) * BLOCK);
  expect(hit).toBeGreaterThan(Math.floor(p / BLOCK) * BLOCK + BLOCK);
});
