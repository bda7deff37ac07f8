/**
 * End to end with real processes: 1,000 concurrent streams through llmgw
 * across three sim-engines complete with zero errors; clients that disconnect
 * mid-stream or during the prefill free their KV blocks on every engine (the
 * engines' own metrics return to zero) and the gateway's in-flight counts
 * return to zero.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { parsePrometheusText, sumSamples } from "../../src/engines/prom-text.ts";
import { type Gateway, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { concurrentStreams } from "../helpers/concurrent-streams.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

let sims: Sim[];
let gw: Gateway;

beforeAll(async () => {
  // --output-len 32 restated (the sim's former default): answers now end at a length drawn per prompt, and this test counts exactly 30 tokens a stream.
  sims = await Promise.all([0, 1, 2].map(() => startSim(["--model", "m", "--itl-ms", "40", "--max-num-seqs", "400", "--output-len", "32"])));
  // initial_capacity: the sims' batch size, as an operator would set it (learning is tested elsewhere).
  gw = await startGateway({ log_level: "warn", admission: { initial_capacity: 400 }, endpoints: sims.map((s, i) => ({ id: `sim-${i}`, url: s.api })) }, 3);
}, 60_000);

afterAll(stopAll);

async function engineLoad(sim: Sim): Promise<{ running: number; waiting: number; kv: number }> {
  const samples = parsePrometheusText(await sim.metrics()).samples;
  return {
    running: sumSamples(samples, "vllm:num_requests_running") ?? NaN,
    waiting: sumSamples(samples, "vllm:num_requests_waiting") ?? NaN,
    kv: sumSamples(samples, "vllm:kv_cache_usage_perc") ?? NaN,
  };
}

async function everythingIdle(): Promise<boolean> {
  const loads = await Promise.all(sims.map(engineLoad));
  const eps = await gw.endpoints();
  return loads.every((l) => l.running === 0 && l.waiting === 0 && l.kv === 0) && eps.every((e) => e.inflight === 0);
}

function body(maxTokens: number, content = "tell me a story"): string {
  return JSON.stringify({ model: "m", stream: true, max_tokens: maxTokens, messages: [{ role: "user", content }] });
}

describe("1,000 concurrent streams", () => {
  test("all complete with zero errors, spread over all three engines", async () => {
    const url = `${gw.api}/v1/chat/completions`;
    // 30 tokens at 40 ms: each stream lasts over a second, so all of them overlap.
    const r = await concurrentStreams({ url, bodies: Array.from({ length: 1000 }, (_, i) => body(30, `story ${i}`)) });
    expect(r.firstErrors).toEqual([]);
    expect(r.errors).toBe(0);
    // role chunk + 30 tokens (the last carries finish_reason) + [DONE] for every stream; no error events
    expect(r.eventCounts).toEqual({ "32": 1000 });
    // They really were concurrent: more streams were open at once than Bun's client
    // default (256) would allow.
    console.log(`1,000 streams: peak open at once ${r.peakOpen}`);
    expect(r.peakOpen).toBeGreaterThan(600);
    const served = await Promise.all(sims.map(async (s) => Number((await s.state()).requests_total ?? 0)));
    expect(served.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(1000);
    for (const n of served) expect(n).toBeGreaterThan(100);
    await waitUntil(everythingIdle, { what: "engines and gateway idle", timeoutMs: 10_000 });
  }, 120_000);
});

describe("client disconnects free KV blocks everywhere", () => {
  test("300 clients leaving mid-stream", async () => {
    const url = `${gw.api}/v1/chat/completions`;
    const before = await Promise.all(sims.map(async (s) => Number((await s.state()).disconnects ?? 0)));
    // A few events in, then leave.
    const r = await concurrentStreams({ url, bodies: Array.from({ length: 300 }, () => body(200)), abortAfterChunks: 3 });
    expect(r.aborted).toBe(300);
    await waitUntil(everythingIdle, { what: "KV blocks freed on every engine", timeoutMs: 5_000 });
    const after = await Promise.all(sims.map(async (s) => Number((await s.state()).disconnects ?? 0)));
    expect(after.reduce((a, b) => a + b, 0) - before.reduce((a, b) => a + b, 0)).toBe(300);
  }, 60_000);

  test("50 clients leaving during the prefill, before any byte", async () => {
    await Promise.all(sims.map((s) => s.configure({ prefill_overhead_ms: 3_000 })));
    try {
      const url = `${gw.api}/v1/chat/completions`;
      const before = await Promise.all(sims.map(async (s) => Number((await s.state()).disconnects ?? 0)));
      const r = await concurrentStreams({ url, bodies: Array.from({ length: 50 }, () => body(20)), abortAfterMs: 400 });
      expect(r.aborted).toBe(50);
      // Well before the 3 s prefill would have ended.
      await waitUntil(everythingIdle, { what: "prefill aborted on every engine", timeoutMs: 2_000 });
      const after = await Promise.all(sims.map(async (s) => Number((await s.state()).disconnects ?? 0)));
      expect(after.reduce((a, b) => a + b, 0) - before.reduce((a, b) => a + b, 0)).toBe(50);
    } finally {
      await Promise.all(sims.map((s) => s.configure({ prefill_overhead_ms: 5 })));
    }
  }, 30_000);
});
