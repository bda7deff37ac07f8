/**
 * The dashboard's rates: the page's traffic.js (plain JavaScript, imported
 * here as the browser loads it) on literal snapshots, and the gateway's
 * totals from prom-client's values (server-fault outcomes only as errors,
 * TTFT buckets of every model added up).
 */
import { describe, expect, test } from "bun:test";
import { Counter, Histogram, Registry } from "prom-client";
import { trafficTotals } from "../../src/admin/dashboard/dashboard-source.ts";
import { errorRatio, firstResponseQuantile, requestRate, type TrafficSample, tokenRate, ttftQuantile, windowEnds } from "../../src/admin/dashboard/traffic.js";

const histogram = (buckets: [number, number][], count = buckets.at(-1)?.[1] ?? 0) => ({ count, sum: 0, buckets: buckets.map(([le, n]) => ({ le, count: n })) });

function sample(
  at: number,
  requests: number,
  errors: number,
  buckets: [number, number][],
  count = buckets.at(-1)?.[1] ?? 0,
  extra: { headers?: [number, number][]; tokens?: number } = {},
): TrafficSample {
  return {
    at,
    traffic: { requests, errors, ttft: histogram(buckets, count), time_to_headers: histogram(extra.headers ?? []), completion_tokens: extra.tokens ?? 0 },
  };
}

describe("traffic.js", () => {
  test("rate and error share between two snapshots; nothing to say without requests or across a restart", () => {
    const a = sample(0, 100, 2, []);
    const b = sample(2_000, 140, 6, []);
    expect(requestRate(a, b)).toBe(20);
    expect(errorRatio(a, b)).toBe(0.1);
    expect(errorRatio(a, sample(2_000, 100, 2, []))).toBeNull();
    expect(requestRate(a, sample(2_000, 10, 0, []))).toBeNull();
    expect(requestRate(a, a)).toBeNull();
  });

  test("TTFT quantiles interpolate inside the bucket that holds them; the +Inf bucket answers the highest bound", () => {
    const a = sample(0, 0, 0, [
      [0.1, 0],
      [0.5, 0],
      [1, 0],
    ]);
    const b = sample(1_000, 10, 0, [
      [0.1, 4],
      [0.5, 8],
      [1, 10],
    ]);
    expect(ttftQuantile(a, b, 0.2)).toBeCloseTo(0.05, 10);
    expect(ttftQuantile(a, b, 0.5)).toBeCloseTo(0.1 + 0.4 * (1 / 4), 10);
    expect(ttftQuantile(a, b, 0.99)).toBeCloseTo(0.5 + 0.5 * (1.9 / 2), 10);
    // Two of ten above the last finite bound.
    expect(
      ttftQuantile(
        a,
        sample(
          1_000,
          10,
          0,
          [
            [0.1, 4],
            [0.5, 8],
            [1, 8],
          ],
          10,
        ),
        0.99,
      ),
    ).toBe(1);
    expect(ttftQuantile(b, b, 0.5)).toBeNull();
  });

  test("output tokens per second; none across a restart", () => {
    const a = sample(0, 0, 0, [], 0, { tokens: 100 });
    expect(tokenRate(a, sample(2_000, 0, 0, [], 0, { tokens: 700 }))).toBe(300);
    expect(tokenRate(a, sample(2_000, 0, 0, [], 0, { tokens: 10 }))).toBeNull();
    expect(tokenRate(a, a)).toBeNull();
  });

  test("the first-response figure: TTFT when a stream finished in the window, else the time to headers, marked; nothing with neither", () => {
    const zero: [number, number][] = [
      [0.1, 0],
      [1, 0],
    ];
    const a = sample(0, 0, 0, zero, 0, { headers: zero });
    const nonStreamed = sample(1_000, 4, 0, zero, 0, {
      headers: [
        [0.1, 0],
        [1, 4],
      ],
    });
    expect(firstResponseQuantile(a, nonStreamed, 0.5)).toEqual({ value: 0.55, kind: "headers" });
    const mixed = sample(
      1_000,
      6,
      0,
      [
        [0.1, 2],
        [1, 2],
      ],
      2,
      {
        headers: [
          [0.1, 0],
          [1, 4],
        ],
      },
    );
    expect(firstResponseQuantile(a, mixed, 0.5)).toEqual({ value: 0.05, kind: "ttft" });
    expect(firstResponseQuantile(a, a, 0.5)).toBeNull();
  });

  test("the window: the oldest snapshot within it and the newest", () => {
    const s = [0, 500, 1_000, 11_000, 11_500].map((at) => sample(at, at, 0, []));
    expect(windowEnds(s, 10_000)).toEqual({ first: s[3]!, last: s[4]! });
    expect(windowEnds(s, 11_000)).toEqual({ first: s[1]!, last: s[4]! });
    expect(windowEnds(s.slice(0, 1), 10_000)).toBeNull();
  });
});

describe("trafficTotals", () => {
  test("every outcome counts as a request; only no_endpoint, upstream_error, stream_error and timeout as errors; TTFT of every model together", async () => {
    const registry = new Registry();
    const requests = new Counter({ name: "r_total", help: "r", labelNames: ["model", "route", "outcome"], registers: [registry] });
    const ttft = new Histogram({ name: "t", help: "t", labelNames: ["model"], buckets: [0.1, 1], registers: [registry] });
    const duration = new Histogram({ name: "d", help: "d", labelNames: ["model", "route", "stream"], buckets: [0.1, 1], registers: [registry] });
    const tokens = new Counter({ name: "k_total", help: "k", labelNames: ["model", "kind"], registers: [registry] });
    requests.inc({ model: "a", route: "chat", outcome: "ok" }, 5);
    requests.inc({ model: "a", route: "chat", outcome: "client_error" }, 2);
    requests.inc({ model: "b", route: "chat", outcome: "upstream_error" }, 1);
    requests.inc({ model: "b", route: "chat", outcome: "timeout" }, 1);
    requests.inc({ model: "b", route: "chat", outcome: "rejected" }, 3);
    ttft.observe({ model: "a" }, 0.05);
    ttft.observe({ model: "b" }, 0.5);
    ttft.observe({ model: "b" }, 5);
    const t0 = trafficTotals(await requests.get(), await ttft.get(), await duration.get(), await tokens.get());
    expect({ headers: t0.time_to_headers.count, tokens: t0.completion_tokens }).toEqual({ headers: 0, tokens: 0 });
    duration.observe({ model: "a", route: "chat", stream: "true" }, 3);
    duration.observe({ model: "a", route: "chat", stream: "false" }, 0.5);
    duration.observe({ model: "b", route: "embeddings", stream: "false" }, 0.05);
    tokens.inc({ model: "a", kind: "prompt" }, 40);
    tokens.inc({ model: "a", kind: "completion" }, 7);
    tokens.inc({ model: "b", kind: "completion" }, 5);
    const t = trafficTotals(await requests.get(), await ttft.get(), await duration.get(), await tokens.get());
    expect({ requests: t.requests, errors: t.errors }).toEqual({ requests: 12, errors: 2 });
    expect(t.ttft.count).toBe(3);
    expect(t.ttft.sum).toBeCloseTo(5.55, 10);
    expect(t.ttft.buckets).toEqual([
      { le: 0.1, count: 1 },
      { le: 1, count: 2 },
    ]);
    // Time to headers: the non-streamed requests' durations only, every route.
    expect(t.time_to_headers.count).toBe(2);
    expect(t.time_to_headers.buckets).toEqual([
      { le: 0.1, count: 1 },
      { le: 1, count: 2 },
    ]);
    expect(t.completion_tokens).toBe(12);
  });
});
