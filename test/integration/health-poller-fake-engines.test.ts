/**
 * The endpoint poller against in-process fake engines on port 0 that serve the
 * real vLLM/SGLang /metrics captures: loading → ready, process gone
 * (connection refused), a hanging /metrics cut at the deadline, auto-detected
 * flavors, and stop() aborting a poll in flight.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { EndpointPoller, type EngineEndpoint, type PollerOptions } from "../../src/polling/endpoint-poller.ts";
import type { EndpointSnapshot } from "../../src/polling/readiness.ts";
import { sharedFixture as fixture } from "../helpers/fixtures.ts";

interface FakeEngine {
  url: string;
  state: { metrics: string; models: "loading" | "ready"; hangMetrics: boolean; healthStatus: number };
  /** Requests received, by path. */
  hits: Record<string, number>;
  kill(): void;
}

const engines: FakeEngine[] = [];
const pollers: EndpointPoller[] = [];

afterEach(async () => {
  await Promise.all(pollers.splice(0).map((p) => p.stop()));
  for (const e of engines.splice(0)) e.kill();
});

function startFakeEngine(metrics: string, model: string): FakeEngine {
  const state: FakeEngine["state"] = { metrics, models: "ready", hangMetrics: false, healthStatus: 200 };
  const hits: Record<string, number> = {};
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const path = new URL(req.url).pathname;
      hits[path] = (hits[path] ?? 0) + 1;
      switch (path) {
        case "/metrics":
          if (state.hangMetrics) {
            // Never answers on its own; gives up when the client goes away.
            return new Promise<Response>((resolve) => req.signal.addEventListener("abort", () => resolve(new Response("late"))));
          }
          return new Response(state.metrics, { headers: { "content-type": "text/plain; version=0.0.4" } });
        case "/health":
          return new Response("", { status: state.healthStatus });
        case "/v1/models":
          return state.models === "ready"
            ? Response.json({ object: "list", data: [{ id: model, object: "model", owned_by: "fake" }] })
            : Response.json({ error: { message: "model is loading", type: "unavailable" } }, { status: 503 });
        default:
          return new Response("not found", { status: 404 });
      }
    },
  });
  const engine: FakeEngine = { url: `http://127.0.0.1:${server.port}`, state, hits, kill: () => void server.stop(true) };
  engines.push(engine);
  return engine;
}

function makePoller(endpoints: EngineEndpoint[], opts: Partial<PollerOptions> = {}): { poller: EndpointPoller; snaps: Map<number, EndpointSnapshot[]> } {
  const snaps = new Map<number, EndpointSnapshot[]>();
  const poller = new EndpointPoller(endpoints, { intervalMs: 50, timeoutMs: 300, staleAfterMs: 2_000, ...opts }, (index, s) => {
    const list = snaps.get(index) ?? [];
    list.push(s);
    snaps.set(index, list);
  });
  pollers.push(poller);
  return { poller, snaps };
}

const VLLM = fixture("vllm-metrics__opt-125m__datadog-fixture.txt");
const SGLANG_DOCS = fixture("sglang-metrics__llama-3.1-8b__sglang-docs-example.txt");
const SGLANG_TP = fixture("sglang-metrics__v0.5.10.post1__datadog-fixture.txt");

describe("endpoint poller against fake engines", () => {
  test("flavor is auto-detected from each real capture", async () => {
    const a = startFakeEngine(VLLM, "facebook/opt-125m");
    const b = startFakeEngine(SGLANG_DOCS, "meta-llama/Llama-3.1-8B-Instruct");
    const c = startFakeEngine(SGLANG_TP, "facebook/opt-125m");
    const { poller } = makePoller([
      { index: 0, id: "vllm", url: a.url, engine: "auto" },
      { index: 1, id: "sglang-docs", url: `${b.url}/v1`, engine: "auto" },
      { index: 2, id: "sglang-tp", url: c.url, engine: "auto", models: ["facebook/opt-125m"] },
    ]);
    await poller.pollOnce();
    expect(poller.snapshot(0)?.metrics).toMatchObject({ flavor: "vllm-v1", running: 0, waiting: 0, kvUsage: 0 });
    expect(poller.snapshot(1)?.metrics).toMatchObject({ flavor: "sglang", running: 162, waiting: 2826, kvUsage: 0.28 });
    expect(poller.snapshot(2)?.metrics).toMatchObject({ flavor: "sglang", running: 0, waiting: 0, kvUsage: 0.25 });
    for (const i of [0, 1, 2]) {
      expect(poller.snapshot(i)?.ready).toBe(true);
      expect(poller.snapshot(i)?.lastError).toBeUndefined();
    }
    // A base URL ending in /v1 still reaches /metrics at the root.
    expect(b.hits["/metrics"]).toBe(1);
  });

  test("not ready while /v1/models is 503 (loading), ready after", async () => {
    const e = startFakeEngine(VLLM, "facebook/opt-125m");
    e.state.models = "loading";
    const { poller } = makePoller([{ index: 0, id: "e", url: e.url, engine: "vllm", models: ["facebook/opt-125m"] }]);
    await poller.pollOnce();
    const loading = poller.snapshot(0)!;
    expect(loading.healthy).toBe(true);
    expect(loading.loadedModels).toBeUndefined();
    expect(loading.ready).toBe(false);
    expect(loading.lastError).toBe("GET /v1/models: HTTP 503");
    expect(loading.consecutiveFailures).toBe(0);

    e.state.models = "ready";
    await poller.pollOnce();
    const ready = poller.snapshot(0)!;
    expect(ready.loadedModels).toEqual(["facebook/opt-125m"]);
    expect(ready.ready).toBe(true);
    expect(ready.lastError).toBeUndefined();
  });

  test("a configured model the engine does not list keeps it unready", async () => {
    const e = startFakeEngine(VLLM, "facebook/opt-125m");
    const { poller } = makePoller([{ index: 0, id: "e", url: e.url, engine: "auto", models: ["facebook/opt-125m", "other"] }]);
    await poller.pollOnce();
    expect(poller.snapshot(0)?.healthy).toBe(true);
    expect(poller.snapshot(0)?.ready).toBe(false);
  });

  test("process gone: connection refused, healthy false, failures grow, old metrics kept", async () => {
    const e = startFakeEngine(SGLANG_TP, "facebook/opt-125m");
    const { poller } = makePoller([{ index: 3, id: "e", url: e.url, engine: "auto" }]);
    await poller.pollOnce();
    const good = poller.snapshot(3)!;
    expect(good.healthy).toBe(true);
    expect(good.metricsAt).toBeDefined();

    e.kill();
    await poller.pollOnce();
    await poller.pollOnce();
    const dead = poller.snapshot(3)!;
    expect(dead.healthy).toBe(false);
    expect(dead.ready).toBe(false);
    expect(dead.loadedModels).toBeUndefined();
    expect(dead.consecutiveFailures).toBe(2);
    expect(dead.lastError).toStartWith("GET /health: ");
    expect(dead.lastError).toContain("ECONNREFUSED");
    expect(dead.metrics).toEqual(good.metrics);
    expect(dead.metricsAt).toBe(good.metricsAt);
  });

  test("a hanging /metrics is cut at timeoutMs; the old metrics stay with their old metricsAt", async () => {
    const timeoutMs = 300;
    const e = startFakeEngine(VLLM, "facebook/opt-125m");
    const { poller } = makePoller([{ index: 0, id: "e", url: e.url, engine: "auto" }], { timeoutMs, staleAfterMs: 60_000 });
    await poller.pollOnce();
    const before = poller.snapshot(0)!;

    e.state.hangMetrics = true;
    const t0 = performance.now();
    await poller.pollOnce();
    const took = performance.now() - t0;
    const after = poller.snapshot(0)!;
    expect(took).toBeGreaterThanOrEqual(timeoutMs - 20);
    expect(took).toBeLessThan(timeoutMs * 10);
    expect(after.pollMs).toBeGreaterThanOrEqual(timeoutMs - 20);
    expect(after.lastError).toBe(`GET /metrics: timed out after ${timeoutMs} ms`);
    expect(after.healthy).toBe(true);
    expect(after.ready).toBe(true);
    expect(after.metrics).toEqual(before.metrics);
    expect(after.metricsAt).toBe(before.metricsAt!);
    expect(after.metricsStale).toBe(false);
    // A hung /metrics does not make the endpoint a failure: /health answered.
    expect(after.consecutiveFailures).toBe(0);
  });

  test("start() keeps polling without overlap; stop() aborts a hung poll long before its deadline", async () => {
    const e = startFakeEngine(VLLM, "facebook/opt-125m");
    const { poller, snaps } = makePoller([{ index: 0, id: "e", url: e.url, engine: "auto" }], { intervalMs: 20, timeoutMs: 5_000 });
    poller.start();
    await Bun.sleep(200);
    expect((snaps.get(0) ?? []).length).toBeGreaterThanOrEqual(2);

    e.state.hangMetrics = true;
    await Bun.sleep(100);
    const hitsWhileHung = e.hits["/metrics"] ?? 0;
    await Bun.sleep(200);
    // One hung poll at a time: ticks are skipped, not stacked.
    expect((e.hits["/metrics"] ?? 0) - hitsWhileHung).toBeLessThanOrEqual(1);
    expect(poller.skippedTicks).toBeGreaterThan(0);

    const t0 = performance.now();
    await poller.stop();
    const stopMs = performance.now() - t0;
    expect(stopMs).toBeLessThan(5_000 / 2);
    const count = (snaps.get(0) ?? []).length;
    await Bun.sleep(100);
    expect((snaps.get(0) ?? []).length).toBe(count);
  });
});
