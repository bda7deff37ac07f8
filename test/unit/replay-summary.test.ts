/** The replay's summariser, timeline and log histogram over literal records. */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { LogHistogram } from "../../src/bench/replay/log-histogram.ts";
import type { RequestRecord } from "../../src/bench/replay/open-loop-driver.ts";
import { formatReplayText, latencyColumns, latencyRows, type ReplayReport } from "../../src/bench/replay/replay-report.ts";
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
  rec(0, { endpoint: "sim-1", ttftMs: 100, tpotMs: 20 }),
  rec(1, { endpoint: "sim-2", ttftMs: 3000, tpotMs: 20, durationMs: 3500 }), // TTFT over the SLO
  rec(2, { endpoint: "sim-1", ttftMs: 200, tpotMs: 150, durationMs: 2000 }), // TPOT over the SLO
  rec(3, { endpoint: "sim-10", ttftMs: 50, outputTokens: 1 }), // one token: no TPOT, meets that half
  rec(4, { status: 503, error: "HTTP 503 ADMISSION_QUEUE_FULL", outputTokens: 0, durationMs: 2 }),
  rec(5, { endpoint: "sim-2", ttftMs: 80, tpotMs: 30, outputTokens: 6, lateMs: 4 }), // answered short (asked 10)
];

const run = {
  scenario: "replay",
  target: "base-url",
  base_url: "http://127.0.0.1:1",
  model_id: "m",
  num_prompts: 6,
  trace: "t.csv",
  trace_format: "azure-csv",
  trace_start_s: 0,
  trace_duration_s: 10,
  speedup: 1,
  date: "2026-12-06T00:00:00.000Z",
  load_process_cpu_s: 0.1,
  load_process_cpu_share: 0.01,
  timeline: { bucket_s: 1, t_s: [], arrivals_per_s: [], ttft_p50_ms: [], ttft_p90_ms: [], tpot_p50_ms: [], errors: [], in_flight: [], endpoint_in_flight: {} },
};

/** The keys `vllm bench serve` writes (vllm/benchmarks/serve.py), for the default --percentile-metrics ttft,tpot,itl plus e2el. */
const VLLM_KEYS = [
  "duration",
  "completed",
  "failed",
  "total_input_tokens",
  "total_output_tokens",
  "request_throughput",
  "request_goodput",
  "output_throughput",
  "total_token_throughput",
  "max_concurrent_requests",
  ...["ttft", "tpot", "itl", "e2el"].flatMap((m) => [`mean_${m}_ms`, `median_${m}_ms`, `std_${m}_ms`, `p99_${m}_ms`]),
];

/** numpy's std (population) and percentile (linear), as vLLM computes them. */
const npStd = (xs: number[]) => {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  return Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / xs.length);
};

test("flat keys in vLLM's names: counts, throughputs, mean/median/std/pN of TTFT, TPOT, ITL, E2EL, goodput under TTFT and TPOT SLOs", () => {
  const itl = new LogHistogram();
  for (const v of [20, 20, 21, 150]) itl.add(v);
  const s = summarize(records, itl.toJSON(), 10_000, { ttftMs: 2000, tpotMs: 100 }, () => 10);
  for (const k of VLLM_KEYS) expect({ k, type: typeof (s as unknown as Record<string, unknown>)[k] }).toEqual({ k, type: "number" });
  // Flat: every figure is a number at the top level; only the llmgw lists are not.
  for (const [k, v] of Object.entries(s))
    if (!["endpoints", "error_kinds", "metric_percentiles"].includes(k)) expect({ k, type: typeof v }).toEqual({ k, type: "number" });

  expect([s.completed, s.failed, s.short_answers]).toEqual([5, 1, 2]);
  expect([s.total_input_tokens, s.total_output_tokens]).toEqual([500, 37]);
  expect(s.duration).toBe(10);
  expect(s.request_throughput).toBeCloseTo(0.5, 9);
  expect(s.output_throughput).toBeCloseTo(3.7, 9);
  expect(s.total_token_throughput).toBeCloseTo(53.7, 9);

  const ttfts = [100, 3000, 200, 50, 80];
  expect(s.mean_ttft_ms).toBeCloseTo(686, 3);
  expect(s.median_ttft_ms).toBe(100);
  expect(s.std_ttft_ms).toBeCloseTo(npStd(ttfts), 3);
  expect(s.p90_ttft_ms).toBeCloseTo(1880, 3); // numpy: 200 + (3000 − 200) × 0.6
  expect(s.p99_ttft_ms).toBeLessThanOrEqual(3000);
  // TPOT: per request of more than one token; the one-token answer has none.
  expect([s.mean_tpot_ms, s.median_tpot_ms]).toEqual([55, 25]);
  expect(s.std_tpot_ms).toBeCloseTo(npStd([20, 20, 150, 30]), 3);
  // ITL: every gap, from the histogram (quantiles within 2 %, mean and std exact).
  expect(s.mean_itl_ms).toBeCloseTo(52.75, 6);
  expect(s.std_itl_ms).toBeCloseTo(npStd([20, 20, 21, 150]), 3);
  expect(Math.abs(s.median_itl_ms - 20) / 20).toBeLessThan(0.02);
  // E2EL: send → last token (durationMs where the record has no e2elMs).
  expect(s.mean_e2el_ms).toBe(1700);
  // Requests 1, 2 and 3 overlap between 3 s and 4 s.
  expect(s.max_concurrent_requests).toBe(3);

  // Goodput: 0, 3 (one token: TPOT 0) and 5 meet both SLOs; 1 misses TTFT, 2 misses TPOT.
  expect([s.goodput_requests, s.goodput_fraction, s.request_goodput, s.goodput_output_throughput]).toEqual([3, 0.5, 0.3, 1.7]);
  expect([s.goodput_slo_ttft_ms, s.goodput_slo_tpot_ms]).toEqual([2000, 100]);
  expect(s.endpoints.map((e) => [e.id, e.requests, e.errors, e.output_tokens])).toEqual([
    ["-", 1, 1, 0],
    ["sim-1", 2, 0, 20],
    ["sim-2", 2, 0, 16],
    ["sim-10", 1, 0, 1],
  ]);
  expect(s.error_kinds).toEqual([{ error: "HTTP 503 ADMISSION_QUEUE_FULL", count: 1 }]);
  expect(s.arrival_lateness_max_ms).toBe(4);
  expect(errorKind("transport: Unable to connect. Is the computer able to access the url?")).toBe("transport error");
});

test("the percentiles asked are the pN keys, named as vLLM names them (99.9 → p99.9_ttft_ms)", () => {
  const s = summarize(records, new LogHistogram().toJSON(), 10_000, { ttftMs: 2000, tpotMs: 100 }, () => 10, [50, 99.9]);
  expect(s.metric_percentiles).toEqual([50, 99.9]);
  expect(s.p50_ttft_ms).toBe(s.median_ttft_ms);
  expect(typeof s["p99.9_e2el_ms"]).toBe("number");
  expect(s.p99_ttft_ms).toBeUndefined();
  // Nothing measured is absent, not zero: NaN here, null in the JSON.
  expect(Number.isNaN(s.mean_itl_ms)).toBe(true);
  expect(JSON.parse(JSON.stringify(s)).mean_itl_ms).toBeNull();
});

test("the table's rows are the JSON's metrics, one name each: TTFT, TPOT, ITL, E2EL with mean, median, std and the percentiles", () => {
  const itl = new LogHistogram();
  for (const v of [20, 20, 21, 150]) itl.add(v);
  const s = summarize(records, itl.toJSON(), 10_000, { ttftMs: 2000, tpotMs: 100 }, () => 10);
  const r = { ...s, ...run } as ReplayReport;
  expect(latencyColumns(r)).toEqual(["latency (ms)", "mean", "median", "std", "p90", "p99"]);
  const rows = latencyRows(r);
  expect(rows.map((row) => row[0])).toEqual(["TTFT", "TPOT", "ITL", "E2EL"]);
  expect(rows[1]!.slice(1, 3)).toEqual(["55", "25"]); // mean_tpot_ms, median_tpot_ms
  const text = formatReplayText(r);
  expect(text).not.toContain("per-request mean");
  expect(text).toContain("request_throughput");
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
