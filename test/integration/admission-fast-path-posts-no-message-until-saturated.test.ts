/**
 * The main thread admits requests to an unsaturated pool by itself: zero
 * messages to the scheduler worker, every decision on the fast path. A pool
 * pushed past its band's limit sends requests through the worker's queue:
 * admit messages (and releases) appear, and queued decisions with them.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { counterValue, type Gateway, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { concurrentStreams } from "../helpers/concurrent-streams.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

afterAll(stopAll);

const streamBody = (tokens: number) => JSON.stringify({ model: "m", stream: true, max_tokens: tokens, messages: [{ role: "user", content: "hi" }] });

async function counts(gw: Gateway) {
  const text = await gw.metrics();
  return {
    admit: counterValue(text, "llmgw_scheduler_messages_total", { kind: "admit" }),
    release: counterValue(text, "llmgw_scheduler_messages_total", { kind: "release" }),
    fast: counterValue(text, "llmgw_admission_path_total", { path: "fast" }),
    queued: counterValue(text, "llmgw_admission_path_total", { path: "queued" }),
  };
}

describe("admission messages", () => {
  let sims: Sim[] = [];
  let gw: Gateway;

  test("an unsaturated pool: 60 requests, zero scheduler messages, 60 fast decisions", async () => {
    sims = await Promise.all([0, 1].map(() => startSim(["--model", "m", "--itl-ms", "2", "--max-num-seqs", "64"])));
    gw = await startGateway(
      {
        health: { poll_interval_ms: 100 },
        admission: { initial_capacity: 64, default_band: "standard", bands: [{ name: "standard", ceiling: 1 }] },
        endpoints: sims.map((s, i) => ({ id: `sim-${i}`, url: s.api, models: ["m"] })),
      },
      2,
    );
    const before = await counts(gw);
    // Ten at a time: well under the pool's 2 × 64 × 1.1.
    for (let round = 0; round < 6; round++) {
      const results = await Promise.all(
        Array.from({ length: 10 }, () =>
          fetch(`${gw.api}/v1/chat/completions`, { method: "POST", body: streamBody(3) }).then(async (r) => [r.status, await r.text()] as const),
        ),
      );
      for (const [status, text] of results) {
        expect(status).toBe(200);
        expect(text).toContain("data: [DONE]");
      }
    }
    const after = await counts(gw);
    expect(after.admit - before.admit).toBe(0);
    expect(after.release - before.release).toBe(0);
    expect(after.fast - before.fast).toBe(60);
    expect(after.queued - before.queued).toBe(0);
    await gw.stop();
  }, 60_000);

  test("a saturated pool: a burst past the band's limit goes through the worker's queue", async () => {
    gw = await startGateway(
      {
        health: { poll_interval_ms: 100 },
        // Two requests per endpoint before the band's limit: the burst must wait.
        admission: { initial_capacity: 2, headroom: 0, default_band: "standard", bands: [{ name: "standard", ceiling: 1, queue_limit: 1000 }] },
        endpoints: sims.map((s, i) => ({ id: `sim-${i}`, url: s.api, models: ["m"] })),
      },
      2,
    );
    const before = await counts(gw);
    const r = await concurrentStreams({ url: `${gw.api}/v1/chat/completions`, bodies: Array.from({ length: 40 }, () => streamBody(20)) });
    expect(r.errors).toBe(0);
    expect(r.ok).toBe(40);
    const after = await counts(gw);
    console.log(
      `saturated burst of 40: ${after.admit - before.admit} admit messages, ${after.release - before.release} releases, ${after.fast - before.fast} fast, ${after.queued - before.queued} queued`,
    );
    expect(after.admit - before.admit).toBeGreaterThan(0);
    expect(after.release - before.release).toBeGreaterThan(0);
    expect(after.queued - before.queued).toBeGreaterThan(0);
    // Every request was decided once, on one path or the other.
    expect(after.fast - before.fast + (after.queued - before.queued)).toBe(40);
    await gw.stop();
    await Promise.all(sims.map((s) => s.stop()));
  }, 60_000);
});

describe("admission messages for LoRA adapters", () => {
  const lora = ["--model", "m", "--itl-ms", "2", "--max-num-seqs", "64", "--enable-lora", "--max-loras", "2", "--lora-modules", "sql=/a/sql", "chat=/a/chat"];
  const adapterBody = (model: string, tokens: number) =>
    JSON.stringify({ model, stream: true, max_tokens: tokens, messages: [{ role: "user", content: "hi" }] });

  test("requests naming adapters cost no scheduler message while the pool is unsaturated", async () => {
    const sims = await Promise.all([0, 1].map(() => startSim(lora)));
    const gw = await startGateway(
      {
        health: { poll_interval_ms: 100 },
        admission: { initial_capacity: 64, default_band: "standard", bands: [{ name: "standard", ceiling: 1 }] },
        endpoints: sims.map((s, i) => ({ id: `sim-${i}`, url: s.api, models: ["m"] })),
      },
      2,
    );
    // The adapters are known once /v1/models was polled.
    await waitUntil(async () => ((await (await fetch(`${gw.api}/v1/models`)).json()) as { data: { id: string }[] }).data.length === 3, {
      what: "adapters discovered",
    });
    const before = await counts(gw);
    for (let round = 0; round < 6; round++) {
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          fetch(`${gw.api}/v1/chat/completions`, { method: "POST", body: adapterBody(i % 2 === 0 ? "sql" : "chat", 3) }).then((r) => r.status),
        ),
      );
      expect(results.every((s) => s === 200)).toBe(true);
    }
    const after = await counts(gw);
    expect(after.admit - before.admit).toBe(0);
    expect(after.fast - before.fast).toBe(60);
    await gw.stop();
    await Promise.all(sims.map((s) => s.stop()));
  }, 60_000);

  test("queued by the worker, an adapter's requests still go where it runs", async () => {
    const sims = await Promise.all([0, 1].map(() => startSim([...lora, "--max-loras", "1"])));
    const gw = await startGateway(
      {
        health: { poll_interval_ms: 50 },
        admission: { initial_capacity: 2, headroom: 0, default_band: "standard", bands: [{ name: "standard", ceiling: 1, queue_limit: 1000 }] },
        endpoints: sims.map((s, i) => ({ id: `sim-${i}`, url: s.api, models: ["m"] })),
      },
      2,
    );
    // sql runs on the first engine (a long request straight to it).
    const hold = new AbortController();
    const held = fetch(`${sims[0]!.api}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "sql", prompt: "hold", max_tokens: 100_000, ignore_eos: true, stream: true }),
      signal: hold.signal,
    }).catch(() => undefined);
    await waitUntil(async () => (await sims[0]!.metrics()).includes('running_lora_adapters="sql"'), { what: "sql running" });
    await Bun.sleep(200);
    const served = async () => Promise.all(sims.map(async (s) => (await s.state()).requests_total as number));
    const [a0, b0] = await served();
    const before = await counts(gw);
    const r = await concurrentStreams({ url: `${gw.api}/v1/chat/completions`, bodies: Array.from({ length: 30 }, () => adapterBody("sql", 10)) });
    expect(r.ok).toBe(30);
    const after = await counts(gw);
    const [a1, b1] = await served();
    expect(after.queued - before.queued).toBeGreaterThan(0);
    expect(a1! - a0!).toBe(30);
    expect(b1! - b0!).toBe(0);
    hold.abort();
    await held;
    await gw.stop();
    await Promise.all(sims.map((s) => s.stop()));
  }, 60_000);
});
