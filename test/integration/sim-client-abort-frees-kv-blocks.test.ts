/** A client that leaves (mid-stream, during prefill, or while a fault holds it) gives its KV blocks back at once. */
import { afterAll, beforeEach, expect, test } from "bun:test";
import { parsePrometheusText } from "../../src/engines/prom-text.ts";
import { type Started, startLlmgw, stopAll, waitUntil } from "../helpers/processes.ts";

let sim: Started;
// An engine of its own for each case, on a port of its own: no connection a case aborted can reach the next
// case's requests through the client's pool, and each case counts only its own disconnects.
beforeEach(async () => {
  // 200 ms per token of decode and 10 ms per prompt token of prefill: requests stay in flight long enough to abort.
  sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "m", "--itl-ms", "200", "--prefill-ms-per-token", "10"]);
});
afterAll(stopAll);

async function metric(name: string): Promise<number> {
  const parsed = parsePrometheusText(await (await fetch(`${sim.url}/metrics`)).text());
  return parsed.samples.filter((s) => s.name === name).reduce((a, s) => a + s.value, 0);
}

/** Several figures from one scrape. */
async function metrics(names: readonly string[]): Promise<number[]> {
  const parsed = parsePrometheusText(await (await fetch(`${sim.url}/metrics`)).text());
  return names.map((name) => parsed.samples.filter((s) => s.name === name).reduce((a, s) => a + s.value, 0));
}

async function state(): Promise<{ running: number; kv_blocks_used: number; disconnects: number }> {
  return (await (await fetch(`${sim.url}/sim/state`)).json()) as { running: number; kv_blocks_used: number; disconnects: number };
}

function start(prompt: string, headers: Record<string, string> = {}): { ac: AbortController; res: Promise<Response> } {
  const ac = new AbortController();
  const res = fetch(`${sim.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: "m", prompt, max_tokens: 100, stream: true }),
    signal: ac.signal,
    // A connection of its own: never one a request aborted before it left in the client's pool.
    keepalive: false,
  });
  return { ac, res };
}

async function expectAllFreed(disconnects: number): Promise<void> {
  await waitUntil(async () => (await metric("vllm:num_requests_running")) === 0 && (await metric("vllm:kv_cache_usage_perc")) === 0, {
    timeoutMs: 3_000,
    what: "running and KV usage back to 0",
  });
  const s = await state();
  expect(s.running).toBe(0);
  expect(s.kv_blocks_used).toBe(0);
  expect(s.disconnects).toBe(disconnects);
  expect(await metric("llmgw_sim_client_disconnects_total")).toBe(disconnects);
}

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

test("abort mid-stream frees the request's KV blocks and counts a disconnect", async () => {
  const { ac, res } = start("short prompt");
  const r = await res;
  const reader = r.body!.getReader();
  await readFirstData(reader); // first token arrived: the request is decoding
  expect(await metric("vllm:num_requests_running")).toBe(1);
  expect(await metric("vllm:kv_cache_usage_perc")).toBeGreaterThan(0);
  ac.abort();
  await expectAllFreed(1);
});

test("abort during prefill (before any byte) frees the blocks too", async () => {
  const { ac, res } = start("p".repeat(4 * 300)); // 300 tokens → ~3 s of prefill
  res.catch(() => {});
  // One scrape for both figures: a running request holds blocks in the same snapshot of the engine.
  let seen: number[] = [];
  await waitUntil(
    async () => {
      seen = await metrics(["vllm:num_requests_running", "vllm:kv_cache_usage_perc"]);
      return seen[0] === 1 && seen[1]! > 0;
    },
    { what: "request admitted, holding its blocks" },
  ).catch(async (err: unknown) => {
    // Say what the engine saw, should this ever time out again.
    throw new Error(`${String(err)}; last scrape: running ${seen[0]}, KV usage ${seen[1]}; /sim/state ${JSON.stringify(await state())}`);
  });
  ac.abort();
  await expectAllFreed(1);
});

test("a faulted request that holds (no-headers, stall) frees its blocks when the client leaves", async () => {
  const held = start("held", { "x-sim-fault": "no-headers" });
  held.res.catch(() => {});
  const stalled = start("stalled", { "x-sim-fault": "stall:1" });
  const r = await stalled.res;
  await r.body!.getReader().read();
  await waitUntil(async () => (await metric("vllm:num_requests_running")) === 2, { what: "both held" });
  held.ac.abort();
  stalled.ac.abort();
  await expectAllFreed(2);
  expect(await metric("vllm:request_success_total")).toBeGreaterThanOrEqual(2); // finished_reason="abort"
});
