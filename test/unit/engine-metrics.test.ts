import { describe, expect, test } from "bun:test";
import { detectFlavor, parseEngineMetrics } from "../../src/engines/engine-metrics.ts";
import { sharedFixture as fixture } from "../helpers/fixtures.ts";

const VLLM_MIXED = "vllm-metrics__opt-125m__datadog-fixture.txt";
const SGLANG_DOCS = "sglang-metrics__llama-3.1-8b__sglang-docs-example.txt";
const SGLANG_TP = "sglang-metrics__v0.5.10.post1__datadog-fixture.txt";

describe("engine metrics over the real samples", () => {
  test("the vLLM fixture mixing V0 and V1 names reads as V1, kv from kv_cache_usage_perc", () => {
    const text = fixture(VLLM_MIXED);
    expect(detectFlavor(text)).toBe("vllm-v1");
    const m = parseEngineMetrics(text, "auto");
    expect(m.flavor).toBe("vllm-v1");
    expect(m.running).toBe(0);
    expect(m.waiting).toBe(0);
    expect(m.kvUsage).toBe(0);
    // 64 hits out of 117 queried tokens.
    expect(m.prefixCacheHitRate).toBeCloseTo(64 / 117, 10);
    expect(m.maxRunning).toBeUndefined();
    expect(m.malformedLines).toBe(0);
  });

  test("V1 name wins over the deprecated V0 name when both are present and differ", () => {
    // Same fixture, with the two KV gauges made to disagree.
    const text = fixture(VLLM_MIXED)
      .replace('vllm:gpu_cache_usage_perc{model_name="facebook/opt-125m"} 0.0', 'vllm:gpu_cache_usage_perc{model_name="facebook/opt-125m"} 0.9')
      .replace('vllm:kv_cache_usage_perc{model_name="facebook/opt-125m"} 0.0', 'vllm:kv_cache_usage_perc{model_name="facebook/opt-125m"} 0.25');
    expect(parseEngineMetrics(text, "auto").kvUsage).toBe(0.25);
  });

  test("the SGLang docs example (model_name only)", () => {
    const m = parseEngineMetrics(fixture(SGLANG_DOCS), "auto");
    expect(m.flavor).toBe("sglang");
    expect(m.running).toBe(162);
    expect(m.waiting).toBe(2826);
    expect(m.kvUsage).toBe(0.28);
    expect(m.prefixCacheHitRate).toBeCloseTo(0.007507552643049313, 12);
    expect(m.maxRunning).toBeUndefined();
  });

  test("the SGLang v0.5.10 capture (tp_rank labels)", () => {
    const m = parseEngineMetrics(fixture(SGLANG_TP), "auto");
    expect(m.flavor).toBe("sglang");
    expect(m.running).toBe(0);
    expect(m.waiting).toBe(0);
    expect(m.kvUsage).toBe(0.25);
    expect(m.prefixCacheHitRate).toBe(0.2);
  });

  test("a forced engine narrows detection to its family", () => {
    expect(parseEngineMetrics(fixture(SGLANG_TP), "vllm").flavor).toBe("unknown");
    expect(parseEngineMetrics(fixture(SGLANG_TP), "vllm").running).toBeUndefined();
    expect(parseEngineMetrics(fixture(VLLM_MIXED), "sglang").flavor).toBe("unknown");
    expect(parseEngineMetrics(fixture(VLLM_MIXED), "vllm").flavor).toBe("vllm-v1");
    expect(parseEngineMetrics(fixture(SGLANG_DOCS), "sglang").running).toBe(162);
  });
});

describe("vLLM snippets", () => {
  test("V0: gpu_cache_usage_perc, swapped, no V1 marker", () => {
    const m = parseEngineMetrics(
      [
        'vllm:num_requests_running{model_name="m"} 3',
        'vllm:num_requests_waiting{model_name="m"} 7',
        'vllm:num_requests_swapped{model_name="m"} 1',
        'vllm:gpu_cache_usage_perc{model_name="m"} 0.42',
        'vllm:gpu_prefix_cache_hit_rate{model_name="m"} 0.5',
      ].join("\n"),
      "auto",
    );
    expect(m).toEqual({ flavor: "vllm-v0", running: 3, waiting: 7, kvUsage: 0.42, prefixCacheHitRate: 0.5, malformedLines: 0 });
  });

  test("V1 data-parallel engines: running/waiting summed, KV the max", () => {
    const m = parseEngineMetrics(
      [
        'vllm:num_requests_running{engine="0",model_name="m"} 4',
        'vllm:num_requests_running{engine="1",model_name="m"} 6',
        'vllm:num_requests_waiting{engine="0",model_name="m"} 0',
        'vllm:num_requests_waiting{engine="1",model_name="m"} 5',
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.2',
        'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.8',
        'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 100',
        'vllm:prefix_cache_queries_total{engine="1",model_name="m"} 100',
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 50',
        'vllm:prefix_cache_hits_total{engine="1",model_name="m"} 0',
      ].join("\n"),
      "auto",
    );
    expect(m.flavor).toBe("vllm-v1");
    expect(m.running).toBe(10);
    expect(m.waiting).toBe(5);
    expect(m.kvUsage).toBe(0.8);
    expect(m.prefixCacheHitRate).toBe(0.25);
  });

  test("an engine label alone marks V1; zero queries leave the hit rate absent", () => {
    const m = parseEngineMetrics(
      [
        'vllm:num_requests_running{engine="0",model_name="m"} 1',
        'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 0',
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 0',
      ].join("\n"),
      "auto",
    );
    expect(m.flavor).toBe("vllm-v1");
    expect(m.kvUsage).toBeUndefined();
    expect("prefixCacheHitRate" in m).toBe(false);
  });

  test("maxRunning from an *_info label when a build states it", () => {
    const m = parseEngineMetrics(
      [
        'vllm:scheduler_config_info{engine="0",max_num_seqs="256"} 1',
        'vllm:scheduler_config_info{engine="1",max_num_seqs="256"} 1',
        'vllm:kv_cache_usage_perc{engine="0"} 0.1',
      ].join("\n"),
      "auto",
    );
    expect(m.maxRunning).toBe(512);
  });

  test("several models behind one URL: summed queues, fullest KV", () => {
    const m = parseEngineMetrics(
      [
        'vllm:num_requests_running{model_name="a"} 2',
        'vllm:num_requests_running{model_name="b"} 3',
        'vllm:gpu_cache_usage_perc{model_name="a"} 0.9',
        'vllm:gpu_cache_usage_perc{model_name="b"} 0.1',
      ].join("\n"),
      "vllm",
    );
    expect(m.flavor).toBe("vllm-v0");
    expect(m.running).toBe(5);
    expect(m.waiting).toBeUndefined();
    expect(m.kvUsage).toBe(0.9);
  });
});

describe("SGLang snippets", () => {
  test("tensor-parallel ranks are not multiply-counted; dp ranks are summed", () => {
    const m = parseEngineMetrics(
      [
        'sglang:num_running_reqs{model_name="m",tp_rank="0"} 8',
        'sglang:num_running_reqs{model_name="m",tp_rank="1"} 8',
        'sglang:num_running_reqs{model_name="m",tp_rank="2"} 8',
        'sglang:num_running_reqs{model_name="m",tp_rank="3"} 8',
        'sglang:num_queue_reqs{dp_rank="0",model_name="m",tp_rank="0"} 2',
        'sglang:num_queue_reqs{dp_rank="1",model_name="m",tp_rank="0"} 3',
        'sglang:token_usage{model_name="m",tp_rank="0"} 0.5',
        'sglang:token_usage{model_name="m",tp_rank="1"} 0.6',
        'sglang:max_running_requests{model_name="m",tp_rank="0"} 64',
        'sglang:max_running_requests{model_name="m",tp_rank="1"} 64',
      ].join("\n"),
      "auto",
    );
    expect(m.running).toBe(8);
    expect(m.waiting).toBe(5);
    expect(m.kvUsage).toBe(0.6);
    expect(m.maxRunning).toBe(64);
  });
});

describe("edge cases", () => {
  test("empty text: unknown, everything absent (never 0)", () => {
    expect(parseEngineMetrics("", "auto")).toEqual({ flavor: "unknown", running: undefined, waiting: undefined, kvUsage: undefined, malformedLines: 0 });
  });

  test("garbage: unknown, malformed lines counted", () => {
    const m = parseEngineMetrics("<html>\n502 Bad Gateway\n</html>", "auto");
    expect(m.flavor).toBe("unknown");
    expect(m.running).toBeUndefined();
    expect(m.malformedLines).toBe(3);
  });

  test("NaN is absent, not zero; ±Inf likewise", () => {
    const m = parseEngineMetrics(
      ['vllm:num_requests_running{engine="0"} NaN', 'vllm:num_requests_waiting{engine="0"} +Inf', 'vllm:kv_cache_usage_perc{engine="0"} NaN'].join("\n"),
      "auto",
    );
    expect(m.flavor).toBe("vllm-v1");
    expect(m.running).toBeUndefined();
    expect(m.waiting).toBeUndefined();
    expect(m.kvUsage).toBeUndefined();
  });

  test("NaN in one series does not blank the others", () => {
    const m = parseEngineMetrics(['vllm:num_requests_running{engine="0"} NaN', 'vllm:num_requests_running{engine="1"} 4'].join("\n"), "auto");
    expect(m.running).toBe(4);
  });

  test("KV usage is clamped into [0,1]", () => {
    expect(parseEngineMetrics('vllm:kv_cache_usage_perc{engine="0"} 1.7', "auto").kvUsage).toBe(1);
    expect(parseEngineMetrics('sglang:token_usage{tp_rank="0"} -0.2', "auto").kvUsage).toBe(0);
    expect(parseEngineMetrics('sglang:cache_hit_rate{tp_rank="0"} 3', "auto").prefixCacheHitRate).toBe(1);
  });

  test("one malformed line does not blank the view", () => {
    const m = parseEngineMetrics(
      ['sglang:num_running_reqs{model_name="m"} 2', 'sglang:num_queue_reqs{model_name="m} 1', "sglang:token_usage 0.3"].join("\n"),
      "auto",
    );
    expect(m.running).toBe(2);
    expect(m.waiting).toBeUndefined();
    expect(m.kvUsage).toBe(0.3);
    expect(m.malformedLines).toBe(1);
  });
});
