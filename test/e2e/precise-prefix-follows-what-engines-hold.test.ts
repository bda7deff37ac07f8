/**
 * Two sim-engines publish vLLM's KV-cache events; the gateway subscribes
 * (endpoints[].kv_events) and routes with its default scorers. Each prefix
 * below is put into an engine's cache directly, behind the gateway's back,
 * so only the engines' own events can tell the gateway where it is (its
 * estimate has never seen it):
 *
 * 1. long prefixes held by A go to A, request after request (with its
 *    estimate alone, the gateway would send each first one anywhere);
 * 2. A's event stream breaks (the connection through a relay drops) while A
 *    caches another prefix; when it comes back the gateway replays what it
 *    missed, drops nothing, and routes that prefix to A too;
 * 3. a prefix both hold, which B then evicts (its small cache filled with
 *    other prompts: BlockRemoved), goes to A only.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { counterValue, type Gateway, SIM_KV_EVENTS, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { TcpRelay } from "../helpers/tcp-relay.ts";

const SIM_ARGS = ["--model", "m", "--itl-ms", "1", "--output-len", "2", "--kv-events-config", SIM_KV_EVENTS];
/** ~1,000 tokens each (~62 blocks of 16): B's 200-block cache holds three. */
const prefix = (name: string) => `${name}: you are a careful assistant for the ${name} team; answer in full sentences. `.repeat(48);

let a: Sim;
let b: Sim;
let relay: TcpRelay;
let gw: Gateway;

beforeAll(async () => {
  [a, b] = await Promise.all([startSim(SIM_ARGS), startSim([...SIM_ARGS, "--num-gpu-blocks", "200"])]);
  // The gateway reaches A's publisher through a relay the test can break; its replay socket directly.
  relay = new TcpRelay("127.0.0.1", Number(new URL(a.kvEvents!.replace("tcp:", "http:")).port)).start();
  gw = await startGateway(
    {
      log_level: "warn",
      endpoints: [
        { id: "a", url: a.api, models: ["m"], kv_events: { endpoint: relay.endpoint, replay_endpoint: a.kvReplay, topic: "kv" } },
        { id: "b", url: b.api, models: ["m"], kv_events: { endpoint: b.kvEvents, replay_endpoint: b.kvReplay, topic: "kv" } },
      ],
    },
    2,
  );
  await waitUntil(async () => (await live("a")) && (await live("b")), { what: "both event streams live" });
}, 60_000);

afterAll(async () => {
  relay?.stop();
  await stopAll();
});

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  return counterValue(await gw.metrics(), name, labels);
}
const live = async (endpoint: string) => (await metric("llmgw_kv_events_stream_state", { endpoint, state: "live" })) === 1;
const blocks = (endpoint: string) => metric("llmgw_kv_index_blocks", { endpoint });

const chat = (system: string, question: string) =>
  JSON.stringify({
    model: "m",
    max_tokens: 2,
    messages: [
      { role: "system", content: system },
      { role: "user", content: question },
    ],
  });

/** Straight to an engine, behind the gateway's back. */
async function direct(sim: Sim, system: string, question: string): Promise<void> {
  const res = await fetch(`${sim.api}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: chat(system, question) });
  expect(res.status).toBe(200);
}

const served = async (sim: Sim) => ((await sim.state()) as { requests_total: number }).requests_total;

/** Which engine the gateway sent each of `n` requests sharing `system` to (one at a time). */
async function routed(system: string, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const [ra, rb] = [await served(a), await served(b)];
    const res = await fetch(`${gw.api}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: chat(system, `question ${i}?`),
    });
    expect(res.status).toBe(200);
    out.push((await served(a)) > ra ? "a" : (await served(b)) > rb ? "b" : "?");
  }
  return out;
}

/** The gateway's index of `endpoint` holds at least `min` blocks more than `from`. */
const indexed = (endpoint: string, from: number, min: number) =>
  waitUntil(async () => (await blocks(endpoint)) >= from + min, { what: `${endpoint}'s blocks indexed` });

test("prefixes only A holds go to A, request after request", async () => {
  const ps = ["billing", "legal", "sales", "support"].map(prefix);
  const before = await blocks("a");
  for (const p of ps) await direct(a, p, "seed");
  await indexed("a", before, 4 * 50);
  for (const p of ps) expect(await routed(p, 2)).toEqual(["a", "a"]);
}, 30_000);

test("after A's stream breaks and returns, what A cached meanwhile is replayed and routed to A; nothing is dropped", async () => {
  const replays = await metric("llmgw_kv_events_replays_total", { endpoint: "a" });
  const before = await blocks("a");
  relay.stop();
  await waitUntil(async () => !(await live("a")), { what: "A's stream seen down" });
  const q = prefix("shipping");
  await direct(a, q, "seed while nobody listens");
  relay.start();
  await indexed("a", before, 50);
  await waitUntil(() => live("a"), { what: "A's stream live again" });
  expect(await metric("llmgw_kv_events_replays_total", { endpoint: "a" })).toBeGreaterThan(replays);
  expect(await metric("llmgw_kv_index_drops_total", { endpoint: "a" })).toBe(0);
  expect(await routed(q, 3)).toEqual(["a", "a", "a"]);
  expect(await routed(prefix("billing"), 1)).toEqual(["a"]);
}, 30_000);

test("prefixes both held go to A once B has evicted them", async () => {
  const rs = ["returns", "refunds"].map(prefix);
  const [ia, ib] = [await blocks("a"), await blocks("b")];
  for (const r of rs) await direct(b, r, "seed");
  for (const r of rs) await direct(a, r, "seed");
  await Promise.all([indexed("a", ia, 2 * 50), indexed("b", ib, 2 * 50)]);
  const removed = await metric("llmgw_kv_events_total", { endpoint: "b", event: "block_removed" });
  for (const f of ["x", "y", "z"]) await direct(b, prefix(`filler ${f}`), "fill");
  await waitUntil(async () => (await metric("llmgw_kv_events_total", { endpoint: "b", event: "block_removed" })) > removed + 100, {
    what: "B's evictions seen",
  });
  for (const r of rs) expect(await routed(r, 2)).toEqual(["a", "a"]);
}, 30_000);
