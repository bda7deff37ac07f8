/** The replay's summariser, timeline and log histogram over literal records. */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { LogHistogram } from "../../src/bench/replay/log-histogram.ts";
import type { RequestRecord } from "../../src/bench/replay/open-loop-driver.ts";
import { errorKind, summarize } from "../../src/bench/replay/summary.ts";
import { bucketWidth, timeline } from "../../src/bench/replay/timeline.ts";
import { replayScenario } from "../../src/bench/replay-scenario.ts";
import { splitArgs } from "../../src/bench/sim-fleet.ts";
import { REPO_ROOT } from "../../src/shared/llmgw-child.ts";

const rec = (id: number, o: Partial<RequestRecord>): RequestRecord => ({
  id,
  atMs: id * 1000,
  lateMs: 0,
  status: 200,
  durationMs: 1000,
  outputTokens: 10,
  promptTokens: 100,
  ...o,
});

const records: RequestRecord[] = [
  rec(0, { endpoint: "sim-1", ttftMs: 100, itlMeanMs: 20 }),
  rec(1, { endpoint: "sim-2", ttftMs: 3000, itlMeanMs: 20, durationMs: 3500 }), // TTFT over the SLO
  rec(2, { endpoint: "sim-1", ttftMs: 200, itlMeanMs: 150, durationMs: 2000 }), // ITL over the SLO
  rec(3, { endpoint: "sim-10", ttftMs: 50, outputTokens: 1 }), // one token: no ITL, meets that half
  rec(4, { status: 503, error: "HTTP 503 ADMISSION_QUEUE_FULL", outputTokens: 0, durationMs: 2 }),
  rec(5, { endpoint: "sim-2", ttftMs: 80, itlMeanMs: 30, outputTokens: 6, lateMs: 4 }), // answered short (asked 10)
];

test("percentiles over answered requests, goodput under both SLOs, load per endpoint, errors by kind", () => {
  const itl = new LogHistogram();
  for (const v of [20, 20, 21, 150]) itl.add(v);
  const s = summarize(records, itl.toJSON(), 10_000, { ttftMs: 2000, itlMs: 100 }, () => 10);
  expect(s.requests).toEqual({ total: 6, answered: 5, errors: 1, short_answers: 2 });
  expect(s.ttft_ms.p50).toBe(100);
  expect(s.ttft_ms.p50).toBeLessThanOrEqual(s.ttft_ms.p90);
  expect(s.ttft_ms.p90).toBeLessThanOrEqual(s.ttft_ms.p99);
  expect(s.ttft_ms.mean).toBeCloseTo((100 + 3000 + 200 + 50 + 80) / 5, 6);
  expect(s.itl_ms.mean).toBeCloseTo(52.75, 6);
  expect(Math.abs(s.itl_ms.p50 - 20) / 20).toBeLessThan(0.02);
  expect(s.goodput).toEqual({ slo_ttft_ms: 2000, slo_itl_ms: 100, requests: 3, fraction: 0.5, requests_per_s: 0.3, output_tokens_per_s: 1.7 });
  expect(s.throughput.output_tokens_per_s).toBeCloseTo(3.7, 6);
  expect(s.endpoints.map((e) => [e.id, e.requests, e.errors, e.output_tokens])).toEqual([
    ["-", 1, 1, 0],
    ["sim-1", 2, 0, 20],
    ["sim-2", 2, 0, 16],
    ["sim-10", 1, 0, 1],
  ]);
  expect(s.errors).toEqual([{ error: "HTTP 503 ADMISSION_QUEUE_FULL", count: 1 }]);
  expect(s.arrival_lateness_ms.max).toBe(4);
  expect(errorKind("transport: Unable to connect. Is the computer able to access the url?")).toBe("transport error");
});

test("the timeline: arrivals per bucket, requests open on average, per endpoint", () => {
  const t = timeline(records, { speedup: 2, startS: 100, durationS: 10 });
  // The last request ends 6.004 s into the run: 12.008 s of trace at ×2.
  expect(t.bucket_s).toBe(bucketWidth(12.008));
  expect(t.t_s.length).toBe(Math.ceil(12.008 / t.bucket_s));
  expect(t.t_s[0]).toBe(100);
  const total = t.arrivals_per_s.reduce((a, b) => a + b * t.bucket_s, 0);
  expect(Math.round(total)).toBe(6);
  // Area under in-flight = request-seconds of trace time = Σ duration × speedup / 1000.
  const area = t.in_flight.reduce((a, b) => a + b * t.bucket_s, 0);
  const expected = records.reduce((a, r) => a + (r.durationMs * 2) / 1000, 0);
  expect(area).toBeCloseTo(expected, 1);
  expect(Object.keys(t.endpoint_in_flight)).toEqual(["sim-1", "sim-2", "sim-10"]);
  expect(t.ttft_p50_ms.some((v) => v === null)).toBe(true);
});

test("the log histogram: quantiles within 2 %, mergeable, through JSON", () => {
  const h = new LogHistogram();
  for (let i = 1; i <= 1000; i++) h.add(i);
  for (const [q, want] of [
    [0.5, 500],
    [0.9, 900],
    [0.99, 990],
  ] as const)
    expect(Math.abs(h.quantile(q) - want) / want).toBeLessThan(0.02);
  const back = LogHistogram.from(JSON.parse(JSON.stringify(h.toJSON())));
  back.merge(h);
  expect(back.count).toBe(2000);
  expect(back.quantile(1)).toBe(1000);
  expect(Number.isNaN(LogHistogram.from(new LogHistogram().toJSON()).quantile(0.5))).toBe(true);
});

test("engine flags split like a shell's words", () => {
  expect(splitArgs("  --itl-ms 10 --model-name 'a b' --x \"c d\"  ")).toEqual(["--itl-ms", "10", "--model-name", "a b", "--x", "c d"]);
  expect(splitArgs("")).toEqual([]);
  expect(() => splitArgs("--x 'open")).toThrow(/unbalanced/);
});

test("every flag of bench replay is in its --help and in docs/benchmarks.md", () => {
  const docs = readFileSync(join(REPO_ROOT, "docs", "benchmarks.md"), "utf8");
  const section = docs.slice(docs.indexOf("## `llmgw bench replay`"));
  for (const flag of [...Object.keys(replayScenario.options), "json"]) {
    expect({ flag, help: replayScenario.usage.includes(`--${flag}`), docs: section.includes(`--${flag}`) }).toEqual({ flag, help: true, docs: true });
  }
});
