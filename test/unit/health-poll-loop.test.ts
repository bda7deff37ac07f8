import { describe, expect, test } from "bun:test";
import { EndpointPoller } from "../../src/polling/endpoint-poller.ts";
import { PollLoop } from "../../src/polling/poll-loop.ts";
import { type FetchFn, originPath, probe } from "../../src/polling/probe.ts";
import type { EndpointSnapshot } from "../../src/polling/readiness.ts";
import { setLogLevel } from "../../src/shared/logger.ts";

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe("PollLoop", () => {
  test("a target still busy skips ticks instead of overlapping", async () => {
    let started = 0;
    let concurrent = 0;
    let maxConcurrent = 0;
    const release = deferred();
    const loop = new PollLoop(1, 10, async () => {
      started++;
      concurrent++;
      maxConcurrent = Math.max(maxConcurrent, concurrent);
      await release.promise;
      concurrent--;
    });
    loop.start();
    await Bun.sleep(80); // ~8 ticks while the first poll hangs
    expect(started).toBe(1);
    expect(loop.skippedTicks).toBeGreaterThanOrEqual(3);
    release.resolve();
    await Bun.sleep(30);
    expect(started).toBeGreaterThanOrEqual(2);
    expect(maxConcurrent).toBe(1);
    await loop.stop();
  });

  test("stop aborts in-flight polls and waits for them", async () => {
    let sawAbort = false;
    const loop = new PollLoop(2, 1_000, (_i, signal) => new Promise<void>((resolve) => signal.addEventListener("abort", () => ((sawAbort = true), resolve()))));
    loop.start();
    await Bun.sleep(5);
    await loop.stop();
    expect(sawAbort).toBe(true);
    expect(loop.running).toBe(false);
  });

  test("a throwing poll does not kill the loop", async () => {
    setLogLevel("silent"); // the loop logs each failure; expected here
    let calls = 0;
    const loop = new PollLoop(1, 5, async () => {
      calls++;
      throw new Error("bug");
    });
    loop.start();
    await Bun.sleep(40);
    await loop.stop();
    setLogLevel("info");
    expect(calls).toBeGreaterThanOrEqual(3);
  });
});

describe("probe", () => {
  test("a fetch that never answers is cut at the deadline", async () => {
    const hang: FetchFn = (_url, init) =>
      new Promise((_r, reject) => init.signal?.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))));
    const t0 = performance.now();
    const r = await probe(hang, "http://127.0.0.1:1/metrics", 50, new AbortController().signal, "GET /metrics");
    const took = performance.now() - t0;
    expect(r).toEqual({ ok: false, status: undefined, error: "GET /metrics: timed out after 50 ms", timedOut: true });
    expect(took).toBeGreaterThanOrEqual(45);
  });

  test("non-2xx is a failure with its status", async () => {
    const r = await probe(async () => new Response("loading", { status: 503 }), "http://x/v1/models", 100, new AbortController().signal, "GET /v1/models");
    expect(r).toEqual({ ok: false, status: 503, error: "GET /v1/models: HTTP 503", timedOut: false });
  });

  test("paths are taken at the origin of the configured URL", () => {
    expect(originPath("http://127.0.0.1:8000/v1", "/metrics")).toBe("http://127.0.0.1:8000/metrics");
    expect(originPath("http://127.0.0.1:8000/", "/v1/models")).toBe("http://127.0.0.1:8000/v1/models");
  });
});

describe("EndpointPoller with an injected fetch", () => {
  test("routes the three probes and reports by table index", async () => {
    const seen: string[] = [];
    const fake: FetchFn = async (url) => {
      seen.push(new URL(url).pathname);
      if (url.endsWith("/metrics")) return new Response('vllm:num_requests_running{engine="0"} 3\nvllm:kv_cache_usage_perc{engine="0"} 0.4\n');
      if (url.endsWith("/v1/models")) return Response.json({ object: "list", data: [{ id: "m" }] });
      return new Response("");
    };
    const got: Array<[number, EndpointSnapshot]> = [];
    const poller = new EndpointPoller(
      [{ index: 7, id: "e7", url: "http://10.0.0.1:8000", engine: "auto", models: ["m"] }],
      { intervalMs: 1_000, timeoutMs: 100, staleAfterMs: 1_000, fetch: fake },
      (i, s) => got.push([i, s]),
    );
    await poller.pollOnce();
    expect(seen.sort()).toEqual(["/health", "/metrics", "/v1/models"]);
    expect(got).toHaveLength(1);
    const [index, snap] = got[0]!;
    expect(index).toBe(7);
    expect(snap.ready).toBe(true);
    expect(snap.metrics?.running).toBe(3);
    expect(snap.metrics?.kvUsage).toBe(0.4);
    expect(poller.snapshot(7)).toBe(snap);
    expect(poller.snapshot(0)).toBeUndefined();
  });
});
