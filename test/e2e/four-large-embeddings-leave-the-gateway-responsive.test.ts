/**
 * The case that took a gateway from 110 MB to 2.5 GB and blocked its event
 * loop for seconds: four concurrent embeddings requests of 30,000 short
 * inputs (about 290 KB each) whose answers are about 240 MB of JSON each.
 * The answers now stream through (never held whole, never parsed whole), so
 * while they do: the gateway's resident memory stays within a bound, /health
 * answers within 50 ms, and healthy streams of other clients on another
 * engine complete with no error and nothing counted against that engine.
 *
 * "Within 50 ms" is judged on each /health probe's latency net of the time
 * the gateway's main thread (or the prober) waited for a CPU meanwhile: on a
 * shared 2-core machine a stall of the machine once made the worst probe
 * 101 ms — the gateway's loop, runnable, waiting on a run queue — which says
 * nothing about what the gateway does with 240 MB answers. Its own work (a
 * parse, a copy, a synchronous write) is time on a CPU and stays in.
 *
 * The large-answer engine is an in-process Bun.serve that writes its JSON as
 * it goes (it must not hold 1 GB itself); the gateway and the sim-engine are
 * real processes.
 */
import { afterAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import type { Server } from "bun";
import { concurrentStreams } from "../../src/bench/concurrent-streams.ts";
import { counterValue, startGateway, startSim } from "../helpers/cluster.ts";
import { startLatencyProber } from "../helpers/latency-prober.ts";
import { stopAll } from "../helpers/processes.ts";
import { startRogueEngine } from "../helpers/rogue-engine.ts";

/** The gateway's admin token: the full collection before the RSS reading is a change that needs it. */
const ADMIN_TOKEN = "embeddings-test-admin-token";
const INPUTS = 30_000;
const DIM = 880;
/** Documented bound (README, Failure handling): what four such answers may add to the gateway's RSS. */
const RSS_BOUND_MIB = 256;
/** Vectors in a rehearsal's answer. */
const WARM_VECTORS = 64;

let engine: Server<undefined>;
afterAll(async () => {
  await stopAll();
  engine?.stop(true);
});

/** One embeddings answer of `n` vectors for `inputs` inputs, written as it goes: about 8 KB of JSON per vector at DIM 880 (240 MB for 30,000). */
function embeddingsAnswer(n: number, inputs: number): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  const vector = `[${Array.from({ length: DIM }, (_, i) => (0.000123 * i).toFixed(6)).join(",")}]`;
  let i = 0;
  return new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(enc.encode('{"object":"list","model":"embed","data":['));
    },
    pull(c) {
      if (i >= n) {
        c.enqueue(enc.encode(`],"usage":{"prompt_tokens":${inputs},"total_tokens":${inputs}}}`));
        c.close();
        return;
      }
      let part = "";
      for (let k = 0; k < 64 && i < n; k++, i++) part += `${i > 0 ? "," : ""}{"object":"embedding","index":${i},"embedding":${vector}}`;
      c.enqueue(enc.encode(part));
    },
  });
}

const rssMiB = (pid: number) => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;

test("four 240 MB embeddings answers stream through: bounded RSS, /health within 50 ms, healthy streams unharmed", async () => {
  engine = startRogueEngine(["embed"], async (req, path) => {
    if (path !== "/v1/embeddings") return new Response("", { status: 404 });
    const body = (await req.json()) as { input: string[] };
    // A rehearsal's request (first input "warm") is answered with a few vectors: the same paths, a short answer.
    const vectors = body.input[0] === "warm" ? Math.min(body.input.length, WARM_VECTORS) : body.input.length;
    return new Response(embeddingsAnswer(vectors, body.input.length), { headers: { "content-type": "application/json" } });
  });
  const sim = await startSim(["--model", "chat", "--itl-ms", "20"]);
  const gw = await startGateway(
    {
      admin: { token: ADMIN_TOKEN },
      health: { poll_interval_ms: 200 },
      endpoints: [
        { id: "embedder", url: `http://127.0.0.1:${engine.port}`, models: ["embed"] },
        { id: "sim", url: sim.api, models: ["chat"] },
      ],
    },
    2,
  );
  const pid = gw.proc.pid;
  const input = Array.from({ length: INPUTS }, (_, i) => `short input number ${i}`);
  const big = JSON.stringify({ model: "embed", input });
  expect(big.length).toBeGreaterThan(250_000);
  // A rehearsal first, the measured round's shape with short answers: four large bodies and twenty
  // streams at once. The measurement is then of the large answers, not of code compiled for the
  // first time (a cold gateway's first burst of such requests costs 80–95 ms of CPU in one turn).
  const rehearsal = await Promise.all([
    ...Array.from({ length: 4 }, async () => {
      const res = await fetch(`${gw.api}/v1/embeddings`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "embed", input: ["warm", ...input.slice(1)] }),
      });
      await res.arrayBuffer();
      return res.status;
    }),
    concurrentStreams({
      url: `${gw.api}/v1/chat/completions`,
      bodies: Array.from({ length: 20 }, (_, i) =>
        JSON.stringify({ model: "chat", stream: true, max_tokens: 4, messages: [{ role: "user", content: `warm ${i}` }] }),
      ),
    }).then((r) => r.ok),
  ]);
  expect(rehearsal).toEqual([200, 200, 200, 200, 20]);
  const promptTokensBefore = counterValue(await gw.metrics(), "llmgw_tokens_total", { model: "embed", kind: "prompt" });
  const gcStarted = performance.now();
  expect((await fetch(`${gw.admin}/admin/v1/diagnostics/gc`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status).toBe(200);
  const gcMs = performance.now() - gcStarted;
  const rest = rssMiB(pid);
  // The full collection asked for holds the gateway's loop (over 100 ms after the rehearsal, on a busy
  // host): its stall is recorded at the loop monitor's next tick, which must fall before the baseline.
  await Bun.sleep(200);

  // The gateway's own loop stalls (not waits for a CPU): all of them, and those past 100 ms.
  const ownStalls = async () => {
    const text = await gw.metrics();
    const all = counterValue(text, "llmgw_event_loop_stall_seconds_count", { cause: "gateway" });
    const over = (le: string) => all - counterValue(text, "llmgw_event_loop_stall_seconds_bucket", { cause: "gateway", le });
    return { all, over100ms: over("0.1"), over250ms: over("0.25") };
  };
  const ownStallsBefore = await ownStalls();
  // /health latency from a process of its own; RSS sampled here.
  const prober = startLatencyProber(`${gw.api}/health`, pid);
  let sampling = true;
  let peak = rest;
  const rssSampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, rssMiB(pid));
      await Bun.sleep(20);
    }
  })();

  const embeddings = Promise.all(
    Array.from({ length: 4 }, async () => {
      const res = await fetch(`${gw.api}/v1/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: big });
      expect(res.status).toBe(200);
      let bytes = 0;
      let tail = "";
      for await (const c of res.body!) {
        bytes += c.byteLength;
        tail = (tail + new TextDecoder().decode(c.subarray(-200))).slice(-200);
      }
      return { bytes, tail };
    }),
  );
  const streams = concurrentStreams({
    url: `${gw.api}/v1/chat/completions`,
    bodies: Array.from({ length: 20 }, (_, i) =>
      JSON.stringify({ model: "chat", stream: true, max_tokens: 40, messages: [{ role: "user", content: `healthy ${i}` }] }),
    ),
  });
  const [answers, healthy] = await Promise.all([embeddings, streams]);
  sampling = false;
  await rssSampler;
  const health = await prober.stop();

  for (const a of answers) {
    expect(a.bytes).toBeGreaterThan(230_000_000);
    expect(a.tail).toContain(`"usage":{"prompt_tokens":${INPUTS}`);
  }
  expect(healthy.errors).toBe(0);
  expect(healthy.ok).toBe(20);
  const metrics = await gw.metrics();
  expect(counterValue(metrics, "llmgw_upstream_failures_total", { endpoint: "sim" })).toBe(0);
  // The usage came from the answers' tails (never parsed whole).
  expect(counterValue(metrics, "llmgw_tokens_total", { model: "embed", kind: "prompt" }) - promptTokensBefore).toBe(4 * INPUTS);
  console.log(
    `four large embeddings: RSS rest ${rest.toFixed(0)} MiB, peak ${peak.toFixed(0)} MiB; /health slowest ${health.slowestMs.map((ms) => ms.toFixed(1)).join(", ")} ms (net of CPU waits ${health.slowestNetMs.map((ms) => ms.toFixed(1)).join(", ")}), median ${health.medianMs.toFixed(1)} ms over ${health.probes} probes`,
  );
  expect(peak - rest).toBeLessThan(RSS_BOUND_MIB);
  expect(health.failures).toBe(0);
  expect(health.probes).toBeGreaterThan(10);
  // The gateway's loop monitor (a 20 ms timer) never ran 250 ms late of the gateway's own making
  // (not waiting for a CPU; the defect held the loop for seconds), past 100 ms at most once, past
  // 50 ms at most twice. Beside two CPU-bound processes about one run in six records one gap of
  // 100–250 ms in which no /health probe was held (in one: 821 probes, the slowest 19 ms net of
  // CPU waits): the loop was serving I/O, the probes' included, while its timer waited. What a
  // client waits for is judged on the probes, below.
  const ownStallsAfter = await ownStalls();
  const stalls = {
    all: ownStallsAfter.all - ownStallsBefore.all,
    over100ms: ownStallsAfter.over100ms - ownStallsBefore.over100ms,
    over250ms: ownStallsAfter.over250ms - ownStallsBefore.over250ms,
  };
  console.log(
    `gateway stalls of its own: ${stalls.all} (over 100 ms: ${stalls.over100ms}, over 250 ms: ${stalls.over250ms}); before them, ${ownStallsBefore.all} (the asked-for collection took ${gcMs.toFixed(0)} ms)`,
  );
  expect(stalls.over250ms).toBe(0);
  expect(stalls.over100ms).toBeLessThanOrEqual(1);
  expect(stalls.all).toBeLessThanOrEqual(2);
  // One late probe may be the prober's own (a GC pause of its own, which no run-queue counter
  // shows: beside two CPU-bound processes one of 546 read 66 ms net, the next 14.6) or that
  // one stall's; two are not.
  expect(health.slowestNetMs[1]!).toBeLessThan(50);
}, 180_000);
