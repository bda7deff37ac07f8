/** A repeated prompt prefix hits the prefix cache and gets its first token sooner; more requests than --max-num-seqs wait. */
import { afterAll, expect, test } from "bun:test";
import { parsePrometheusText } from "../../src/engines/prom-text.ts";
import { startLlmgw, stopAll, waitUntil } from "../helpers/processes.ts";

afterAll(stopAll);

async function metric(url: string, name: string): Promise<number> {
  const parsed = parsePrometheusText(await (await fetch(`${url}/metrics`)).text());
  return parsed.samples.filter((s) => s.name === name).reduce((a, s) => a + s.value, 0);
}

/** Milliseconds until the first token event of a streamed chat request (past the comment that flushes the headers). */
async function ttftMs(url: string, system: string, question: string): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "m",
      messages: [
        { role: "system", content: system },
        { role: "user", content: question },
      ],
      max_tokens: 2,
      stream: true,
    }),
  });
  const reader = res.body!.getReader();
  for (let seen = ""; !seen.includes("data: "); ) seen += new TextDecoder().decode((await reader.read()).value ?? new Uint8Array());
  const t = performance.now() - t0;
  while (!(await reader.read()).done);
  return t;
}

test("a repeated prefix raises prefix-cache hits and lowers TTFT", async () => {
  const sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "m", "--itl-ms", "5", "--prefill-ms-per-token", "1", "--prefill-overhead-ms", "0"]);
  const system = "You are a helpful assistant. ".repeat(40); // ~290 tokens of shared prefix
  const cold = await ttftMs(sim.url, system, "first question?");
  const hits0 = await metric(sim.url, "vllm:prefix_cache_hits_total");
  const warm = await ttftMs(sim.url, system, "second question?");
  const hits1 = await metric(sim.url, "vllm:prefix_cache_hits_total");
  const other = await ttftMs(sim.url, "A different system prompt entirely. ".repeat(32), "first question?");
  expect(hits0).toBe(0);
  expect(hits1).toBeGreaterThan(200);
  expect(await metric(sim.url, "vllm:prefix_cache_queries_total")).toBeGreaterThan(hits1);
  // Prefill scales with uncached tokens: the warm request computes only its tail.
  expect(warm).toBeLessThan(cold / 2);
  expect(warm).toBeLessThan(other / 2);
});

test("more requests than --max-num-seqs wait and show in num_requests_waiting", async () => {
  const sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "m", "--itl-ms", "20", "--max-num-seqs", "2"]);
  const streams = Array.from({ length: 5 }, () =>
    fetch(`${sim.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", prompt: "hi", max_tokens: 15, stream: true }),
    }).then((r) => r.text()),
  );
  await waitUntil(async () => (await metric(sim.url, "vllm:num_requests_waiting")) === 3, { timeoutMs: 3_000, what: "3 waiting" });
  expect(await metric(sim.url, "vllm:num_requests_running")).toBe(2);
  const state = (await (await fetch(`${sim.url}/sim/state`)).json()) as { running: number; waiting: number };
  expect([state.running, state.waiting]).toEqual([2, 3]);
  const bodies = await Promise.all(streams);
  for (const b of bodies) expect(b.endsWith("data: [DONE]\n\n")).toBe(true);
  expect(await metric(sim.url, "vllm:num_requests_waiting")).toBe(0);
  expect(await metric(sim.url, "vllm:request_queue_time_seconds_count")).toBe(5);
  // The later three queued for roughly one batch's worth of decoding.
  expect(await metric(sim.url, "vllm:request_queue_time_seconds_sum")).toBeGreaterThan(3 * 15 * 0.02 * 0.5);
});
