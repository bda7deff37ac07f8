/**
 * llm-d's topology: the gateway binds one SUB socket (kv_events.listen) and
 * the sim-engines' publishers connect to it, as vLLM's do when their
 * --kv-events-config endpoint names a host; each endpoint is told apart by
 * its topic (kv@<pod>@<model>). Each prefix is put into an engine's cache
 * directly, behind the gateway's back, so only the engines' own events can
 * tell the gateway where it is:
 *
 * 1. prefixes held by A go to A, request after request, one of them cached
 *    before the gateway was there to hear it (from A's replay socket);
 * 2. A's connection to the gateway drops (through a relay) while A caches
 *    another prefix; A's publisher connects again, its next batch starts a
 *    replay from A's own replay socket, nothing is dropped, and that prefix
 *    goes to A too;
 * 3. an engine publishing a topic no endpoint names is counted and dropped.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { counterValue, type Gateway, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { TcpRelay } from "../helpers/tcp-relay.ts";
import { freePort } from "../helpers/zmtp-raw-peer.ts";

/** vLLM's --kv-events-config for a publisher that connects to `endpoint`, its replay socket bound on a free port. */
const connectingTo = (endpoint: string, topic: string) =>
  JSON.stringify({ enable_kv_cache_events: true, publisher: "zmq", endpoint, replay_endpoint: "tcp://*:0", topic });
const SIM_ARGS = ["--model", "m", "--itl-ms", "1", "--output-len", "2"];
/** ~1,000 tokens each (~62 blocks of 16). */
const prefix = (name: string) => `${name}: you are a careful assistant for the ${name} team; answer in full sentences. `.repeat(48);

let a: Sim;
let b: Sim;
let stranger: Sim;
let relay: TcpRelay;
let gw: Gateway;

beforeAll(async () => {
  const listen = await freePort();
  // A reaches the gateway through a relay the test can break; B and the stranger directly.
  relay = new TcpRelay("127.0.0.1", listen).start();
  [a, b, stranger] = await Promise.all([
    startSim([...SIM_ARGS, "--kv-events-config", connectingTo(relay.endpoint, "kv@a@m")]),
    startSim([...SIM_ARGS, "--kv-events-config", connectingTo(`tcp://127.0.0.1:${listen}`, "kv@b@m")]),
    startSim([...SIM_ARGS, "--kv-events-config", connectingTo(`tcp://127.0.0.1:${listen}`, "kv@stranger@m")]),
  ]);
  // Cached while no gateway listens: only A's replay buffer has it.
  await direct(a, prefix("history"), "seed before the gateway");
  gw = await startGateway(
    {
      log_level: "warn",
      kv_events: { listen: `tcp://127.0.0.1:${listen}` },
      endpoints: [
        { id: "a", url: a.api, models: ["m"], kv_events: { topic: "kv@a@m", replay_endpoint: a.kvReplay } },
        { id: "b", url: b.api, models: ["m"], kv_events: { topic: "kv@b@m", replay_endpoint: b.kvReplay } },
      ],
    },
    2,
  );
  // The engines' publishers (reconnecting with backoff until the gateway bound its socket) all connected.
  await waitUntil(async () => (await metric("llmgw_kv_events_listen_publishers", {})) === 3, { what: "three publishers connected", timeoutMs: 20_000 });
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
  const [ia, ib] = [await blocks("a"), await blocks("b")];
  expect(ia).toBe(0);
  // A connected publisher says nothing of who it is: each stream is known by its topic from its first batch on.
  for (const p of ps) await direct(a, p, "seed");
  await direct(b, prefix("unrelated"), "seed");
  await Promise.all([indexed("a", ia, 5 * 50), indexed("b", ib, 50)]);
  await waitUntil(async () => (await live("a")) && (await live("b")), { what: "both event streams live" });
  for (const p of [prefix("history"), ...ps]) expect(await routed(p, 2)).toEqual(["a", "a"]);
}, 30_000);

test("A's connection to the gateway drops and returns: what A cached meanwhile is replayed, nothing dropped, and routed to A", async () => {
  const replays = await metric("llmgw_kv_events_replays_total", { endpoint: "a" });
  const before = await blocks("a");
  relay.stop();
  await waitUntil(async () => !(await live("a")), { what: "A's stream seen down" });
  const q = prefix("shipping");
  await direct(a, q, "seed while nobody listens");
  relay.start();
  // A's publisher connects again (with backoff); its next batch, on the new connection, starts the replay.
  // A batch needs a full block of prompt: each poke caches a few.
  let poke = 0;
  await waitUntil(
    async () => {
      await direct(a, `poke ${poke++}: `.repeat(12), "anything");
      return (await blocks("a")) >= before + 50 && (await live("a"));
    },
    { what: "A reconnected, replayed and live", intervalMs: 500, timeoutMs: 30_000 },
  );
  expect(await metric("llmgw_kv_events_replays_total", { endpoint: "a" })).toBeGreaterThan(replays);
  expect(await metric("llmgw_kv_index_drops_total", { endpoint: "a" })).toBe(0);
  expect(await routed(q, 3)).toEqual(["a", "a", "a"]);
  expect(await routed(prefix("billing"), 1)).toEqual(["a"]);
}, 45_000);

test("an engine publishing a topic no endpoint names is counted and dropped; the others' indexes are untouched", async () => {
  const [ia, ib] = [await blocks("a"), await blocks("b")];
  const unknown = await metric("llmgw_kv_events_unrouted_messages_total", { reason: "unknown-topic" });
  await direct(stranger, prefix("elsewhere"), "seed");
  await waitUntil(async () => (await metric("llmgw_kv_events_unrouted_messages_total", { reason: "unknown-topic" })) > unknown, {
    what: "the stranger's batches counted",
  });
  expect([await blocks("a"), await blocks("b")]).toEqual([ia, ib]);
  expect(await metric("llmgw_kv_events_unrouted_messages_total", { reason: "malformed" })).toBe(0);
  expect((await gw.endpoints()).map((e) => e.id).sort()).toEqual(["a", "b"]);
}, 30_000);
