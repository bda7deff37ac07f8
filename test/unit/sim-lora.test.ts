/** The sim-engine's LoRA adapters: vLLM's max_loras rule in the scheduler, the cost of a swap, the two caches, the flags and the metric's text. */
import { describe, expect, test } from "bun:test";
import { type CoreConfig, type CoreTiming, EngineCore } from "../../src/sim/engine-core.ts";
import { AdapterSlots } from "../../src/sim/lora/adapter-slots.ts";
import { EngineLora } from "../../src/sim/lora/engine-lora.ts";
import { adapterBytes, adapterCostModel, diskLoadMs, swapMs } from "../../src/sim/lora/load-cost.ts";
import { expandLoraModulesArgv, LoraConfigError, loraSettings, parseLoraModule, runtimeLoraUpdatesAllowed } from "../../src/sim/lora/lora-config.ts";
import { goFloat, LoraRequestsInfo, MAX_SERIES } from "../../src/sim/lora/lora-metric.ts";
import { findArch } from "../../src/sim/profiles/model-facts.ts";
import type { SeqAdapter, SeqSink } from "../../src/sim/sequence.ts";
import { NO_FRONTEND, type StepTiming } from "../../src/sim/step-time.ts";

/** A flat clock: decode steps of 10 ms; a prefill-only step takes the 1 ms minimum a step has. */
const FLAT: StepTiming = { derived: undefined, derivedScale: 1, flatDecode: { itlMs: 10, batchSlowdown: 0, maxNumSeqs: 16 }, flatPrefill: { msPerToken: 0 } };
const TIMING: CoreTiming = { timing: FLAT, jitter: 0, frontendJitterMs: 0, frontend: NO_FRONTEND, firstTokenDelayMs: 0 };
const LLAMA_8B = findArch("llama-3.1-8b")!;

function core(maxLoras: number, over: Partial<CoreConfig> = {}): EngineCore {
  return new EngineCore({ maxNumSeqs: 16, maxNumBatchedTokens: 4096, numGpuBlocks: 4000, blockSize: 16, maxModelLen: 8192, maxLoras, ...over }, TIMING);
}

class Sink implements SeqSink {
  first = -1;
  done = -1;
  constructor(private readonly clock: { t: number }) {}
  token(index: number) {
    if (index === 0) this.first = this.clock.t;
  }
  finish() {
    this.done = this.clock.t;
  }
  cut() {}
}

function req(sink: SeqSink, outputTokens: number, adapter?: SeqAdapter) {
  return {
    prompt: { count: 16, ids: new Int32Array(0), blockHashes: [], state: 1, continued: 0 },
    outputTokens,
    finishReason: "length" as const,
    stallAfter: -1,
    cutAfter: -1,
    intervalMs: 0,
    sink,
    ...(adapter ? { adapter } : {}),
  };
}

function run(c: EngineCore, clock: { t: number }): void {
  for (let i = 0; i < 100_000; i++) {
    const t = c.nextEventAt();
    if (t === Infinity) return;
    clock.t = t;
    c.advance(t);
  }
}

const settings = (over: Partial<Parameters<typeof loraSettings>[0]> = {}) =>
  loraSettings({ enableLora: true, modules: [], ...over }, {}, { arch: LLAMA_8B, gpuId: "h100", tp: 1 })!;

describe("sim LoRA: the scheduler's max_loras rule", () => {
  test("a step holds at most max_loras adapters: a request for a third waits until one adapter's requests are gone, and others overtake it", () => {
    const clock = { t: 0 };
    const c = core(2);
    const a = { id: 1, name: "a" };
    const b = { id: 2, name: "b" };
    const x = { id: 3, name: "x" };
    const longA = new Sink(clock);
    const longB = new Sink(clock);
    const third = new Sink(clock);
    const laterA = new Sink(clock);
    const base = new Sink(clock);
    c.submit(req(longA, 10, a), 0);
    c.submit(req(longB, 20, b), 0);
    c.submit(req(third, 2, x), 0);
    c.submit(req(laterA, 2, a), 0);
    c.submit(req(base, 2), 0);
    run(c, clock);
    // The request for a running adapter, and the base model's, were scheduled at once, past the one for x.
    expect(longA.first).toBe(1);
    expect(laterA.first).toBe(1);
    expect(base.first).toBe(1);
    // x waited for every request of a (the first adapter to drain) to finish.
    expect(third.first).toBeGreaterThan(longA.done);
    expect(third.first).toBeLessThan(longB.done);
  });

  test("without LoRA limits (maxLoras 0) every request is scheduled at once", () => {
    const clock = { t: 0 };
    const c = core(0);
    const sinks = [1, 2, 3, 4].map(() => new Sink(clock));
    sinks.forEach((s, i) => c.submit(req(s, 5, { id: i + 1, name: `a${i}` }), 0));
    run(c, clock);
    expect(sinks.map((s) => s.first)).toEqual([1, 1, 1, 1]);
  });
});

describe("sim LoRA: what a load costs", () => {
  test("an adapter's size and swap time follow from the model and the GPU's host link", () => {
    const h100 = adapterCostModel(LLAMA_8B, "h100", 1);
    const a100 = adapterCostModel(LLAMA_8B, "a100-40gb", 1);
    // Rank 16 over q, k, v, o, gate, up, down of 32 layers: 16 × 32 × 81,920 features × 2 bytes.
    expect(adapterBytes(h100, 16)).toBe(16 * 32 * 81_920 * 2);
    expect(adapterBytes(adapterCostModel(LLAMA_8B, "h100", 2), 16)).toBe(adapterBytes(h100, 16) / 2);
    // PCIe Gen5 moves it faster than Gen4; both add the per-tensor copies (2 × 7 × 32 of them).
    expect(swapMs(h100, 16)).toBeCloseTo(83_886_080 / (63e6 * 0.8) + 448 * 0.01, 6);
    expect(swapMs(a100, 16)).toBeGreaterThan(swapMs(h100, 16));
    expect(swapMs(h100, 64)).toBeGreaterThan(swapMs(h100, 16));
    expect(diskLoadMs(h100, 16)).toBeGreaterThan(swapMs(h100, 16));
    const fixed = adapterCostModel(LLAMA_8B, "h100", 1, { swapMs: 50, diskMs: 500 });
    expect(swapMs(fixed, 16)).toBe(50);
    expect(diskLoadMs(fixed, 16)).toBe(500);
  });

  test("a step that swaps an adapter into a full slot set lasts the swap longer; a resident adapter costs nothing", () => {
    const s = settings({ maxLoras: 1, maxCpuLoras: 4, swapMs: 40, modules: ["a=/a", "b=/b"] });
    const clock = { t: 0 };
    const c = core(1);
    const lora = new EngineLora(s, ["base"]);
    c.lora = lora;
    const a = lora.resolve("a")!;
    const b = lora.resolve("b")!;
    const first = new Sink(clock);
    c.submit(req(first, 1, a), 0);
    run(c, clock);
    // The first step copies a into the empty slot: its 1 ms of prefill + 40 ms of swap.
    expect(first.first).toBe(41);
    const again = new Sink(clock);
    const t0 = clock.t;
    c.submit(req(again, 1, a), t0);
    run(c, clock);
    expect(again.first - t0).toBe(1);
    const other = new Sink(clock);
    const t1 = clock.t;
    c.submit(req(other, 1, b), t1);
    run(c, clock);
    expect(other.first - t1).toBe(41);
    expect(lora.state()).toMatchObject({ gpu_loads: 2, on_gpu: ["b"] });
  });
});

describe("sim LoRA: host memory and GPU slots", () => {
  const ad = (id: number) => ({ id, swapMs: 5, diskMs: 50 });

  test("GPU slots are an LRU of max_loras; host memory an LRU of max_cpu_loras that holds what the GPU holds", () => {
    const slots = new AdapterSlots(2, 3);
    expect(slots.activate([ad(1), ad(2)])).toBe(2 * (50 + 5));
    expect(slots.activate([ad(1)])).toBe(0);
    // 3 takes the slot of 2 (least recently used); host memory still has room.
    expect(slots.activate([ad(3)])).toBe(55);
    expect(slots.onGpu()).toEqual([1, 3]);
    expect(slots.inHost()).toEqual([2, 1, 3]);
    // 2 comes back from host memory: a swap, no disk read.
    expect(slots.activate([ad(2)])).toBe(5);
    // 4 needs host room: the least recent there (1) leaves, and with it its GPU slot.
    expect(slots.activate([ad(4)])).toBe(55);
    expect(slots.inHost()).not.toContain(1);
    expect(slots.onGpu()).toEqual([2, 4]);
    expect(slots.stats).toMatchObject({ gpuLoads: 5, diskLoads: 4 });
    expect(() => new AdapterSlots(4, 2)).toThrow("max_cpu_loras (2) must be >= max_loras (4)");
  });
});

describe("sim LoRA: flags as vLLM takes them", () => {
  test("name=path, the JSON form, and several items after one flag", () => {
    expect(parseLoraModule("sql=/adapters/sql")).toEqual({ name: "sql", path: "/adapters/sql" });
    expect(parseLoraModule('{"name":"sql","path":"/a","base_model_name":"llama"}')).toEqual({ name: "sql", path: "/a", baseModelName: "llama" });
    expect(() => parseLoraModule('{"name":"sql","path":"/a","rank":8}')).toThrow("Invalid fields for --lora-modules");
    expect(() => parseLoraModule("{not json")).toThrow("Invalid JSON format for --lora-modules");
    expect(() => parseLoraModule("a=b=c")).toThrow(LoraConfigError);
    expect(expandLoraModulesArgv(["--port", "0", "--lora-modules", "a=/x", "b=/y", "--max-loras", "2"])).toEqual([
      "--port",
      "0",
      "--lora-modules",
      "a=/x",
      "--lora-modules",
      "b=/y",
      "--max-loras",
      "2",
    ]);
  });

  test("vLLM's defaults and refusals", () => {
    const s = settings();
    expect(s).toMatchObject({ maxLoras: 1, maxLoraRank: 16, maxCpuLoras: 1, runtimeUpdates: false });
    expect(() => settings({ maxLoras: 4, maxCpuLoras: 2 })).toThrow("max_cpu_loras (2) must be >= max_loras (4)");
    expect(() => settings({ maxLoraRank: 12 })).toThrow("--max-lora-rank");
    expect(() => settings({ modules: ["a=/x", "a=/y"] })).toThrow("already been loaded");
    expect(() => loraSettings({ enableLora: false, modules: ["a=/x"] }, {}, { arch: LLAMA_8B, gpuId: "h100", tp: 1 })).toThrow("--enable-lora");
    expect(loraSettings({ enableLora: false, modules: [] }, {}, { arch: LLAMA_8B, gpuId: "h100", tp: 1 })).toBeUndefined();
    expect(runtimeLoraUpdatesAllowed({ VLLM_ALLOW_RUNTIME_LORA_UPDATING: " True " })).toBe(true);
    expect(runtimeLoraUpdatesAllowed({ VLLM_ALLOW_RUNTIME_LORA_UPDATING: "yes" })).toBe(false);
    expect(runtimeLoraUpdatesAllowed({})).toBe(false);
  });
});

describe("sim LoRA: vllm:lora_requests_info", () => {
  test("one series per label combination ever set, valued with the time it was last set, labels sorted as prometheus_client writes them", () => {
    let now = 1_788_626_457.7368872;
    const m = new LoraRequestsInfo(2, () => now);
    m.record(["a"], ["x"]);
    now += 1;
    m.record([], []);
    const text = m.text();
    expect(text).toBe(
      [
        "# HELP vllm:lora_requests_info Running stats on lora requests.",
        "# TYPE vllm:lora_requests_info gauge",
        'vllm:lora_requests_info{max_lora="2",running_lora_adapters="a",waiting_lora_adapters="x"} 1.7886264577368872e+09',
        'vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""} 1.7886264587368872e+09',
        "",
      ].join("\n"),
    );
    // The same combination again: one series, its value moved on.
    now += 1;
    m.record(["a"], ["x"]);
    expect(
      m
        .text()
        .split("\n")
        .filter((l) => l.includes('running_lora_adapters="a"')),
    ).toHaveLength(1);
    expect(goFloat(1.0)).toBe("1.0");
    expect(goFloat(0.25)).toBe("0.25");
    expect(goFloat(1_790_060_019)).toBe("1.790060019e+09");
  });

  test("two steps in one clock tick still order, and the kept series are bounded", () => {
    const m = new LoraRequestsInfo(1, () => 1000);
    for (let i = 0; i < MAX_SERIES + 10; i++) m.record([`a${i}`], []);
    const values = m
      .text()
      .split("\n")
      .filter((l) => l.startsWith("vllm:"))
      .map((l) => Number(l.split(" ")[1]));
    expect(values).toHaveLength(MAX_SERIES);
    for (let i = 1; i < values.length; i++) expect(values[i]!).toBeGreaterThan(values[i - 1]!);
  });
});
