/**
 * Admission against real processes: 401 for bad keys, 429 with OpenAI's
 * rate-limit headers for quota, 503 with Retry-After for a full queue, 504
 * for a TTL, a cancelled request gone from the queue at once, tenants taking
 * turns inside a band, and a simultaneous burst that does not overshoot the
 * learned capacity (leases counted).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { quantile } from "../../src/bench/report.ts";
import { timedStream } from "../../src/bench/stream-client.ts";
import { counterValue, startGateway, startSim } from "../helpers/cluster.ts";
import { concurrentStreams } from "../helpers/concurrent-streams.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

afterAll(stopAll);

const chat = (maxTokens = 3) => JSON.stringify({ model: "m", max_tokens: maxTokens, messages: [{ role: "user", content: "hi" }] });
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

describe("gates and bounded queues", () => {
  test("401, 429, queue full 503, TTL 504, cancel leaves the queue", async () => {
    const sim = await startSim(["--model", "m", "--itl-ms", "5"]);
    const gw = await startGateway(
      {
        auth: {
          keys: [
            { key: "key-of-tenant-a", tenant: "a", max_band: "fast" },
            { key: "key-of-tenant-q", tenant: "q", max_band: "fast" },
          ],
        },
        tenants: [{ name: "q", requests_per_minute: 2 }],
        admission: {
          default_band: "parked",
          bands: [
            { name: "fast", ceiling: 2 },
            // ceiling 0: never flows; only for exercising the queue.
            { name: "parked", ceiling: 0, queue_limit: 2, ttl_ms: 600 },
          ],
        },
        endpoints: [{ id: "sim", url: sim.api }],
      },
      1,
    );
    const post = (headers: Record<string, string>, signal?: AbortSignal) =>
      fetch(`${gw.api}/v1/chat/completions`, { method: "POST", headers, body: chat(), ...(signal ? { signal } : {}) });

    // 401: no key, wrong key.
    for (const headers of [{}, bearer("nope-nope-nope")]) {
      const r = await post(headers);
      expect(r.status).toBe(401);
      const e = ((await r.json()) as { error: { code: string; type: string } }).error;
      expect(e).toMatchObject({ code: "INVALID_API_KEY", type: "authentication_error" });
    }

    // 429 with headers: tenant q may send 2 per minute.
    expect((await post(bearer("key-of-tenant-q"))).status).toBe(200);
    const second = await post(bearer("key-of-tenant-q"));
    expect(second.status).toBe(200);
    expect(second.headers.get("x-ratelimit-limit-requests")).toBe("2");
    const limited = await post(bearer("key-of-tenant-q"));
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(limited.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    expect(((await limited.json()) as { error: { code: string } }).error.code).toBe("RATE_LIMITED");

    // A band that never flows: two wait, the third finds the queue full.
    const parked = { ...bearer("key-of-tenant-a"), "x-llmgw-priority": "parked" };
    const waiting = [post(parked), post(parked)];
    await waitUntil(async () => counterValue(await gw.metrics(), "llmgw_admission_queue_depth", { band: "parked" }) === 2, { what: "two queued" });
    const full = await post(parked);
    expect(full.status).toBe(503);
    expect(Number(full.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(((await full.json()) as { error: { code: string } }).error.code).toBe("ADMISSION_QUEUE_FULL");
    // …and the two waiting ones hit their TTL.
    for (const r of await Promise.all(waiting)) {
      expect(r.status).toBe(504);
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe("ADMISSION_TTL_EXPIRED");
    }

    // A client that leaves while queued is gone from the queue at once.
    const ac = new AbortController();
    const leaving = post(parked, ac.signal).catch(() => undefined);
    await waitUntil(async () => counterValue(await gw.metrics(), "llmgw_admission_queue_depth", { band: "parked" }) === 1, { what: "one queued" });
    const t0 = performance.now();
    ac.abort();
    await leaving;
    await waitUntil(async () => counterValue(await gw.metrics(), "llmgw_admission_queue_depth", { band: "parked" }) === 0, {
      what: "queue empty",
      timeoutMs: 500,
      intervalMs: 10,
    });
    expect(performance.now() - t0).toBeLessThan(500);
    const m = await gw.metrics();
    expect(counterValue(m, "llmgw_admission_rejections_total", { band: "parked", reason: "queue_full" })).toBe(1);
    expect(counterValue(m, "llmgw_admission_rejections_total", { band: "parked", reason: "ttl_expired" })).toBe(2);
    expect(counterValue(m, "llmgw_admission_rejections_total", { band: "parked", reason: "cancelled" })).toBe(1);
    await gw.stop();
    await sim.stop();
  }, 60_000);
});

describe("fairness inside a band", () => {
  test("tenant B's requests wait a few turns while tenant A keeps 300 queued", async () => {
    const sim = await startSim(["--model", "m", "--itl-ms", "10", "--max-num-seqs", "2"]);
    const gw = await startGateway(
      {
        auth: {
          keys: [
            { key: "key-of-tenant-a", tenant: "a" },
            { key: "key-of-tenant-b", tenant: "b" },
          ],
        },
        tenants: [{ name: "a" }, { name: "b" }],
        admission: { initial_capacity: 2, headroom: 0, default_band: "shared", bands: [{ name: "shared", ceiling: 1, queue_limit: 1000, ttl_ms: 60_000 }] },
        endpoints: [{ id: "sim", url: sim.api }],
      },
      1,
    );
    const url = `${gw.api}/v1/chat/completions`;
    const body = JSON.stringify({ model: "m", stream: true, max_tokens: 3, messages: [{ role: "user", content: "x" }] });
    const startedAt = performance.now();
    const a = concurrentStreams({ url, headers: bearer("key-of-tenant-a"), bodies: Array.from({ length: 300 }, () => body) });
    await Bun.sleep(1_000); // A's 300 requests have arrived and queued
    const bTtft: number[] = [];
    for (let i = 0; i < 10; i++) {
      const r = await timedStream(url, body, { headers: bearer("key-of-tenant-b") });
      expect(r.ok).toBe(true);
      bTtft.push(r.ttftMs);
      await Bun.sleep(150);
    }
    const aResult = await a;
    expect(aResult.ok).toBe(300);
    // The last of A's requests got its first token about when A's backlog drained.
    const aP99 = performance.now() - startedAt;
    const bP99 = quantile(bTtft, 0.99);
    console.log(
      `fairness: tenant A backlog drained in ${aP99.toFixed(0)} ms, tenant B ttft p99 ${bP99.toFixed(0)} ms; B: ${bTtft.map((x) => x.toFixed(0)).join(" ")}`,
    );
    // A request takes ~45 ms on one of 2 slots; B waits for at most a few turns.
    expect(bP99).toBeLessThan(400);
    expect(bP99 * 10).toBeLessThan(aP99);
    await gw.stop();
    await sim.stop();
  }, 90_000);
});

describe("leases", () => {
  test("a simultaneous burst of 1,000 against an idle pool stays within learned capacity × (1 + headroom)", async () => {
    const sims = await Promise.all([0, 1].map(() => startSim(["--model", "m", "--itl-ms", "10", "--max-num-seqs", "16"])));
    const headroom = 0.25;
    const gw = await startGateway(
      {
        health: { poll_interval_ms: 50 },
        auth: { keys: [{ key: "key-of-tenant-a", tenant: "a", max_band: "top" }] },
        admission: {
          headroom,
          default_band: "standard",
          bands: [
            { name: "top", ceiling: 2 },
            { name: "standard", ceiling: 1, queue_limit: 5000, ttl_ms: 60_000 },
          ],
        },
        endpoints: sims.map((s, i) => ({ id: `sim-${i}`, url: s.api })),
      },
      2,
    );
    const url = `${gw.api}/v1/chat/completions`;
    // Learn the capacity: never-waiting bursts larger than both engines make them queue.
    // Learned, an endpoint's capacity is at most its 16 slots (unlearned it would be twice the high-water mark).
    const capacities = async () => ((await gw.endpoints()) as unknown as { capacity: number }[]).map((e) => e.capacity);
    for (let round = 0; round < 4 && !(await capacities()).every((c) => c >= 12 && c <= 16); round++) {
      await Promise.all(
        Array.from({ length: 80 }, () => fetch(url, { method: "POST", headers: bearer("key-of-tenant-a"), body: chat(20) }).then((r) => r.text())),
      );
      await Bun.sleep(200);
    }
    const learned = await capacities();
    for (const c of learned) expect(c).toBeGreaterThanOrEqual(12);
    for (const c of learned) expect(c).toBeLessThanOrEqual(16);
    await waitUntil(async () => (await gw.endpoints()).every((e) => e.inflight === 0), { what: "idle" });

    let peak = 0;
    let sampling = true;
    const sampler = (async () => {
      // The gateway's own count: every request holding an endpoint, from its claim on.
      while (sampling) {
        const eps = (await gw.endpoints()) as unknown as { inflight: number }[];
        peak = Math.max(
          peak,
          eps.reduce((n, e) => n + e.inflight, 0),
        );
        await Bun.sleep(2);
      }
    })();
    const standard = { ...bearer("key-of-tenant-a"), "x-llmgw-priority": "standard" };
    // From a child process: `bun test` caps its own outbound requests at 256.
    const streamBody = JSON.stringify({ model: "m", stream: true, max_tokens: 5, messages: [{ role: "user", content: "hi" }] });
    const r = await concurrentStreams({ url, headers: standard, bodies: Array.from({ length: 1000 }, () => streamBody) });
    sampling = false;
    await sampler;
    expect(r.errors).toBe(0);
    expect(r.ok).toBe(1000);
    const total = learned.reduce((a, b) => a + b, 0);
    const limit = Math.ceil(total * (1 + headroom));
    console.log(`burst: peak inflight ${peak}, learned capacity ${total}, limit ${limit}`);
    expect(peak).toBeLessThanOrEqual(limit);
    expect(peak).toBeGreaterThanOrEqual(total); // the burst really filled the pool
    await gw.stop();
    await Promise.all(sims.map((s) => s.stop()));
  }, 90_000);
});
