import { describe, expect, test } from "bun:test";
import { detectFlavor } from "../../src/engines/flavor.ts";
import { parsePrometheusText } from "../../src/engines/prom-text.ts";
import { type MetricsFlavor, newGpuFaultState, type SimStaticConfig } from "../../src/sim/config.ts";
import { gpuSpec, SimGpus } from "../../src/sim/dcgm-text.ts";
import { Engine } from "../../src/sim/engine.ts";
import { renderEngineMetrics } from "../../src/sim/engine-metrics-text.ts";
import { sharedFixture } from "../helpers/fixtures.ts";

const fixed: SimStaticConfig = {
  models: ["org/model"],
  maxNumSeqs: 8,
  numGpuBlocks: 32,
  blockSize: 16,
  maxModelLen: 512,
  outputLen: 4,
  embeddingDim: 8,
  startupMs: 0,
  metricsFlavor: "vllm-v1",
  gpus: 1,
  gpuModel: "NVIDIA H100 80GB HBM3",
  dcgmModelLabel: "DCGM_FI_DEV_NAME",
};

/** A flat 1 ms step, nothing else. */
function live(): ConstructorParameters<typeof Engine>[1] {
  return {
    itlMs: 1,
    prefillOverheadMs: 0,
    prefillMsPerToken: 0,
    jitter: 0,
    batchSlowdown: 0,
    faultRate: 0,
    faultTypes: [],
    dead: false,
    dcgmDead: false,
    gpus: [],
  };
}

async function busyEngine(): Promise<Engine> {
  const e = new Engine(fixed, live());
  let done = () => {};
  const finished = new Promise<void>((r) => (done = r));
  const sink = { token() {}, finish: () => done(), cut() {} };
  e.submit({
    prompt: { count: 40, ids: new Int32Array(40), blockHashes: [1n, 2n], state: 1, continued: 0 },
    outputTokens: 4,
    finishReason: "length",
    stallAfter: -1,
    cutAfter: -1,
    intervalMs: 0,
    sink,
  });
  await finished;
  e.submit({
    prompt: { count: 40, ids: new Int32Array(40), blockHashes: [1n, 2n], state: 1, continued: 0 },
    outputTokens: 100,
    finishReason: "length",
    stallAfter: 0,
    cutAfter: -1,
    intervalMs: 0,
    sink,
  });
  await Bun.sleep(5);
  return e;
}

function names(text: string): Set<string> {
  return new Set(parsePrometheusText(text).samples.map((s) => s.name));
}

/** Metric family names (HELP lines) of a real capture, for comparison. */
function fixtureFamilies(file: string): Set<string> {
  return new Set([...sharedFixture(file).matchAll(/^# HELP (\S+)/gm)].map((m) => m[1]!));
}

describe("sim metrics text", () => {
  test("each flavor is detected as itself by the gateway's own flavor detector", async () => {
    const e = await busyEngine();
    for (const flavor of ["vllm-v1", "vllm-v0", "sglang"] as MetricsFlavor[]) {
      const text = renderEngineMetrics(flavor, e, fixed, performance.now());
      expect(parsePrometheusText(text).malformed).toBe(0);
      expect(detectFlavor(text)).toBe(flavor);
    }
    e.stop();
  });

  test("vLLM v1 names and labels follow the real engine, with live values", async () => {
    const e = await busyEngine();
    const parsed = parsePrometheusText(renderEngineMetrics("vllm-v1", e, fixed, performance.now()));
    const get = (n: string) => parsed.samples.filter((s) => s.name === n);
    expect(get("vllm:num_requests_running")[0]).toEqual({ name: "vllm:num_requests_running", labels: { engine: "0", model_name: "org/model" }, value: 1 });
    expect(get("vllm:kv_cache_usage_perc")[0]!.value).toBeGreaterThan(0);
    expect(get("vllm:prefix_cache_hits_total")[0]!.value).toBe(32); // 2 full blocks of the repeated prompt
    expect(get("vllm:request_success_total").map((s) => s.labels.finished_reason)).toEqual(["stop", "length", "abort"]);
    expect(get("vllm:cache_config_info")[0]!.labels.num_gpu_blocks).toBe("32");
    expect(get("vllm:time_to_first_token_seconds_count")[0]!.value).toBe(1); // the stalled one never got a first token
    // Every name a real V1 scrape shares with us is spelled the same.
    const real = fixtureFamilies("vllm-metrics__opt-125m__datadog-fixture.txt");
    for (const n of [
      "vllm:num_requests_running",
      "vllm:kv_cache_usage_perc",
      "vllm:prefix_cache_queries_total",
      "vllm:generation_tokens_total",
      "vllm:inter_token_latency_seconds",
      "vllm:request_queue_time_seconds",
      "vllm:e2e_request_latency_seconds",
    ]) {
      expect(real.has(n)).toBe(true);
    }
    e.stop();
  });

  test("tokens a step, n and max_tokens are recorded as vLLM records them, under its names and buckets", async () => {
    const e = new Engine(fixed, live());
    // One request with n = 2 and max_tokens 4: two choices, the first carrying n.
    let left = 2;
    let done = () => {};
    const finished = new Promise<void>((r) => (done = r));
    const sink = { token() {}, finish: () => --left === 0 && done(), cut() {} };
    for (const k of [0, 1])
      e.submit({
        prompt: { count: 40, ids: new Int32Array(40), blockHashes: [1n, 2n], state: 1, continued: 0 },
        outputState: k,
        outputTokens: 4,
        finishReason: "length",
        stallAfter: -1,
        cutAfter: -1,
        intervalMs: 0,
        params: { ...(k === 0 ? { n: 2 } : {}), maxTokens: 4 },
        sink,
      });
    await finished;
    const text = renderEngineMetrics("vllm-v1", e, fixed, performance.now());
    const samples = parsePrometheusText(text).samples;
    const one = (n: string) => samples.find((s) => s.name === n)!.value;
    // Each prompt counts once, in the step of its first token; then one token a choice a step.
    expect(one("vllm:iteration_tokens_total_sum")).toBe(2 * 40 + 2 * 4);
    expect(samples.filter((s) => s.name === "vllm:iteration_tokens_total_bucket").map((s) => s.labels.le)).toEqual([
      "1.0",
      "8.0",
      "16.0",
      "32.0",
      "64.0",
      "128.0",
      "256.0",
      "512.0",
      "1024.0",
      "2048.0",
      "4096.0",
      "8192.0",
      "16384.0",
      "+Inf",
    ]);
    expect([one("vllm:request_params_n_count"), one("vllm:request_params_n_sum")]).toEqual([1, 2]);
    expect([one("vllm:request_params_max_tokens_count"), one("vllm:request_params_max_tokens_sum")]).toEqual([2, 8]);
    const real = fixtureFamilies("vllm-metrics__opt-125m__datadog-fixture.txt");
    for (const n of ["vllm:iteration_tokens_total", "vllm:request_params_n", "vllm:request_params_max_tokens"]) {
      expect(real.has(n)).toBe(true);
      expect(text).toContain(`# TYPE ${n} histogram`);
    }
    e.stop();
  });

  test("v0 has only the older names; sglang has the SGLang names", async () => {
    const e = await busyEngine();
    const v0 = names(renderEngineMetrics("vllm-v0", e, fixed, performance.now()));
    expect(v0.has("vllm:gpu_cache_usage_perc")).toBe(true);
    expect(v0.has("vllm:kv_cache_usage_perc")).toBe(false);
    expect(v0.has("vllm:gpu_prefix_cache_hits_total")).toBe(true);
    const sg = names(renderEngineMetrics("sglang", e, fixed, performance.now()));
    const real = fixtureFamilies("sglang-metrics__v0.5.10.post1__datadog-fixture.txt");
    for (const n of [
      "sglang:num_running_reqs",
      "sglang:num_queue_reqs",
      "sglang:token_usage",
      "sglang:cache_hit_rate",
      "sglang:prompt_tokens_total",
      "sglang:generation_tokens_total",
    ]) {
      expect(sg.has(n)).toBe(true);
      expect(real.has(n)).toBe(true);
    }
    expect(sg.has("sglang:time_to_first_token_seconds_bucket")).toBe(true);
    e.stop();
  });

  test("DCGM text follows load and per-GPU faults, with dcgm-exporter's labels, counter set and a flat framebuffer", () => {
    const gpus = new SimGpus(gpuSpec("NVIDIA H100 80GB HBM3"), 2, "host-a", "seed", 0, "modelName", 73_403);
    const faults = [newGpuFaultState(), { ...newGpuFaultState(), xidErrors: 79, temperatureC: 95 }];
    const idle = parsePrometheusText(gpus.render({ utilization: 0 }, faults, 1000)).samples;
    const busy = parsePrometheusText(gpus.render({ utilization: 1 }, faults, 2000)).samples;
    const val = (s: typeof idle, n: string, gpu: string) => s.find((x) => x.name === n && x.labels.gpu === gpu)!.value;
    expect(val(idle, "DCGM_FI_DEV_GPU_UTIL", "0")).toBe(0);
    expect(val(busy, "DCGM_FI_DEV_GPU_UTIL", "0")).toBe(100);
    // vLLM reserves its memory at start: the framebuffer does not follow the load.
    expect(val(busy, "DCGM_FI_DEV_FB_USED", "0")).toBe(73_403);
    expect(val(idle, "DCGM_FI_DEV_FB_USED", "0")).toBe(73_403);
    expect(val(busy, "DCGM_FI_DEV_FB_USED", "0") + val(busy, "DCGM_FI_DEV_FB_FREE", "0") + val(busy, "DCGM_FI_DEV_FB_RESERVED", "0")).toBe(81559);
    expect(val(idle, "DCGM_FI_DEV_XID_ERRORS", "1")).toBe(79);
    expect(val(idle, "DCGM_FI_DEV_GPU_TEMP", "1")).toBe(95);
    expect(val(idle, "DCGM_FI_DEV_XID_ERRORS", "0")).toBe(0);
    const labels = idle.find((x) => x.name === "DCGM_FI_DEV_GPU_UTIL")!.labels;
    expect(Object.keys(labels)).toEqual(["gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname", "DCGM_FI_DRIVER_VERSION"]);
    expect(labels.modelName).toBe("NVIDIA H100 80GB HBM3");
    expect(labels.pci_bus_id).toMatch(/^[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]$/);
    expect(labels.UUID).toMatch(/^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(labels.device).toBe("nvidia0");
    // Every field of the exporter's default counter list, with its HELP string and type.
    const csv = sharedFixture("dcgm-exporter-default-counters.csv");
    const text = gpus.render({ utilization: 0 }, faults, 3000);
    for (const line of csv.split("\n")) {
      const m = /^(DCGM_\w+)\s*,\s*(gauge|counter)\s*,\s*(.+)$/.exec(line.trim());
      if (!m) continue;
      expect(text).toContain(`# HELP ${m[1]} ${m[3]!.trim()}`);
      expect(text).toContain(`# TYPE ${m[1]} ${m[2]}`);
    }
    // The promtool-clean variant: DCGM_FI_DEV_NAME carries the model, cumulative fields without _total are gauges.
    const clean = new SimGpus(gpuSpec("NVIDIA H100 80GB HBM3"), 1, "host-a", "seed", 0, "DCGM_FI_DEV_NAME").render({ utilization: 0 }, faults, 1);
    expect(clean).toContain('DCGM_FI_DEV_NAME="NVIDIA H100 80GB HBM3"');
    expect(clean).not.toContain("modelName=");
    expect(clean).toContain("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION gauge");
  });

  test("a GPU whose utilisation is not reported has no DCGM_FI_DEV_GPU_UTIL sample, and the rest of its fields", () => {
    const gpus = new SimGpus(gpuSpec("NVIDIA H100 80GB HBM3"), 2, "host-a", "seed", 0);
    const faults = [newGpuFaultState(), { ...newGpuFaultState(), utilizationReported: false }];
    const samples = parsePrometheusText(gpus.render({ utilization: 0.5 }, faults, 1000)).samples;
    expect(samples.filter((x) => x.name === "DCGM_FI_DEV_GPU_UTIL").map((x) => x.labels.gpu)).toEqual(["0"]);
    expect(samples.filter((x) => x.name === "DCGM_FI_DEV_FB_USED").map((x) => x.labels.gpu)).toEqual(["0", "1"]);
  });

  test("a GPU pinned to a utilisation reports it whatever the load; the others follow the load", () => {
    const gpus = new SimGpus(gpuSpec("NVIDIA H100 80GB HBM3"), 2, "host-a", "seed", 0);
    const faults = [newGpuFaultState(), { ...newGpuFaultState(), utilizationPct: 97 }];
    const samples = parsePrometheusText(gpus.render({ utilization: 0 }, faults, 1000)).samples;
    const util = samples.filter((x) => x.name === "DCGM_FI_DEV_GPU_UTIL").map((x) => [x.labels.gpu, x.value]);
    expect(util).toEqual([
      ["0", 0],
      ["1", 97],
    ]);
    const power = samples.filter((x) => x.name === "DCGM_FI_DEV_POWER_USAGE").map((x) => x.value);
    expect(power[1]!).toBeGreaterThan(power[0]!);
  });
});
