/**
 * LoRA adapters and precise-prefix routing in one gateway, with the default
 * scorers (precise-prefix and lora-affinity both in them). Two sim-engines
 * serve the base model `llama` with one LoRA slot each and publish vLLM's
 * KV-cache events; `sql` runs on B (a long request sent to it directly).
 *
 * 1. A base-model prompt B holds (put into its cache behind the gateway's
 *    back) goes to B: the engines' events say where it is.
 * 2. A base-model prompt A holds goes to A, through the gateway, so the
 *    gateway has also seen that prefix go to A. Then `sql` requests with
 *    that same prompt go to B, where `sql` runs: A holds the prompt's blocks
 *    for the base model only (an engine keys an adapter's blocks by the
 *    adapter), so neither the index nor the estimate counts them for `sql`.
 *    They are not tokenized, their blocks (stored on B with the adapter's
 *    lora_id) are not indexed, and A never loads `sql`.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { counterValue, type Gateway, SIM_KV_EVENTS, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const BASE = "llama";
const SIM_ARGS = [
  "--model",
  BASE,
  "--itl-ms",
  "5",
  "--enable-lora",
  "--max-loras",
  "1",
  "--max-cpu-loras",
  "4",
  "--lora-modules",
  "sql=/adapters/sql",
  "--kv-events-config",
  SIM_KV_EVENTS,
];
/** ~1,000 tokens each (~62 blocks of 16). */
const prefix = (name: string) => `${name}: you are a careful assistant for the ${name} team; answer in full sentences. `.repeat(48);

let a: Sim;
let b: Sim;
let gw: Gateway;
const hold = new AbortController();
let holder: Promise<unknown> = Promise.resolve();

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  return counterValue(await gw.metrics(), name, labels);
}
const live = async (endpoint: string) => (await metric("llmgw_kv_events_stream_state", { endpoint, state: "live" })) === 1;
const blocks = (endpoint: string) => metric("llmgw_kv_index_blocks", { endpoint });
const served = async (sim: Sim) => ((await sim.state()) as { requests_total: number }).requests_total;
const lora = async (sim: Sim) => (await sim.state()).lora as { gpu_loads: number; on_gpu: string[] };

const chat = (model: string, system: string, question: string) =>
  JSON.stringify({
    model,
    max_tokens: 2,
    messages: [
      { role: "system", content: system },
      { role: "user", content: question },
    ],
  });

/** Straight to an engine, behind the gateway's back. */
async function direct(sim: Sim, system: string): Promise<void> {
  const res = await fetch(`${sim.api}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: chat(BASE, system, "seed"),
  });
  expect(res.status).toBe(200);
}

/** Which engine the gateway sent each of `n` requests for `model` sharing `system` to (one at a time). */
async function routed(model: string, system: string, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const [ra, rb] = [await served(a), await served(b)];
    const res = await fetch(`${gw.api}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: chat(model, system, `question ${i}?`),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { model: string }).model).toBe(model);
    out.push((await served(a)) > ra ? "a" : (await served(b)) > rb ? "b" : "?");
  }
  return out;
}

beforeAll(async () => {
  [a, b] = await Promise.all([startSim(SIM_ARGS), startSim(SIM_ARGS)]);
  gw = await startGateway(
    {
      log_level: "warn",
      health: { poll_interval_ms: 50 },
      // A loaded machine must not turn a tokenize call into a routing guess.
      kv_events: { tokenize: { timeout_ms: 5_000 } },
      endpoints: [
        { id: "a", url: a.api, models: [BASE], kv_events: { endpoint: a.kvEvents, replay_endpoint: a.kvReplay, topic: "kv" } },
        { id: "b", url: b.api, models: [BASE], kv_events: { endpoint: b.kvEvents, replay_endpoint: b.kvReplay, topic: "kv" } },
      ],
    },
    2,
  );
  // `sql` runs on B until the end: its only slot holds it.
  holder = fetch(`${b.api}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "sql", prompt: "hold", max_tokens: 4000, ignore_eos: true, stream: true }),
    signal: hold.signal,
  }).catch(() => undefined);
  await waitUntil(async () => (await live("a")) && (await live("b")), { what: "both event streams live" });
  await waitUntil(async () => (await metric("llmgw_endpoint_lora_adapters", { endpoint: "b", state: "running" })) === 1, { what: "sql seen running on B" });
}, 60_000);

afterAll(async () => {
  hold.abort();
  await holder;
  await stopAll();
});

test("a base-model prompt B holds goes to B", async () => {
  const p = prefix("billing");
  const before = await blocks("b");
  await direct(b, p);
  await waitUntil(async () => (await blocks("b")) >= before + 50, { what: "B's blocks indexed" });
  expect(await routed(BASE, p, 3)).toEqual(["b", "b", "b"]);
}, 30_000);

test("an adapter's requests go where it runs, not to the engine holding their prompt for the base model; its blocks are not indexed", async () => {
  const p = prefix("legal");
  const before = await blocks("a");
  await direct(a, p);
  await waitUntil(async () => (await blocks("a")) >= before + 50, { what: "A's blocks indexed" });
  expect(await routed(BASE, p, 2)).toEqual(["a", "a"]);

  const skippedTokenize = await metric("llmgw_tokenize_skipped_total", { reason: "lora_adapter" });
  const skippedBlocks = await metric("llmgw_kv_index_skipped_blocks_total", { endpoint: "b" });
  const indexedB = await blocks("b");
  expect(await routed("sql", p, 3)).toEqual(["b", "b", "b"]);
  expect(await metric("llmgw_tokenize_skipped_total", { reason: "lora_adapter" })).toBe(skippedTokenize + 3);
  // B stored the prompt's blocks under `sql` (lora_id on their events): counted, not indexed.
  await waitUntil(async () => (await metric("llmgw_kv_index_skipped_blocks_total", { endpoint: "b" })) >= skippedBlocks + 50, {
    what: "B's adapter blocks seen and skipped",
  });
  expect(await blocks("b")).toBe(indexedB);
  // No engine swapped an adapter in for these requests.
  expect((await lora(a)).gpu_loads).toBe(0);
  expect((await lora(b)).on_gpu).toEqual(["sql"]);
  expect((await lora(b)).gpu_loads).toBe(1);
}, 30_000);
