/**
 * --kv-cache-dtype fp8, as vLLM's: K and V take one byte an element instead
 * of bf16's two, so the memory left after the weights holds twice the
 * blocks, and a decode step reads half the KV bytes (its time drops by that
 * share of its memory reads); compute-bound prefill does not change.
 */
import { describe, expect, test } from "bun:test";
import { parseCommandArgs, UsageError } from "../../src/shared/flags.ts";
import { simEngineCommand } from "../../src/sim/command.ts";
import { buildSimConfig } from "../../src/sim/command-config.ts";
import { Engine } from "../../src/sim/engine.ts";
import { renderEngineMetrics } from "../../src/sim/engine-metrics-text.ts";
import { listProfiles, resolveProfile } from "../../src/sim/profiles/catalog.ts";
import { FITTED } from "../../src/sim/profiles/efficiency.ts";
import { findGpu, GIB, MIB } from "../../src/sim/profiles/gpu-facts.ts";
import { findArch, totalParams } from "../../src/sim/profiles/model-facts.ts";
import { deriveProfile, type KvCacheDtype } from "../../src/sim/profiles/profile.ts";
import { type StepComposition, stepMs } from "../../src/sim/step-time.ts";

const h100 = findGpu("h100")!;
const llama8b = findArch("llama-3.1-8b")!;
const derive = (kvCacheDtype?: KvCacheDtype) => deriveProfile({ gpu: h100, arch: llama8b, tp: 1, dtype: "bf16", kvCacheDtype });

function decodes(seqs: number, context: number): StepComposition {
  return {
    seqs,
    tokens: seqs,
    decodeSeqs: seqs,
    decodeContext: seqs * context,
    prefillTokens: 0,
    prefillSeqs: 0,
    prefillContext: 0,
    prefillPairs: 0,
    running: seqs,
  };
}

const timing = (p: ReturnType<typeof derive>) => ({ derived: p.cost, derivedScale: 1, flatDecode: undefined, flatPrefill: undefined });

describe("an fp8 KV cache", () => {
  test("halves the KV bytes of a token and so doubles the blocks the same memory holds", () => {
    const auto = derive();
    const fp8 = derive("fp8");
    expect(auto.kvCacheDtype).toBe("auto");
    expect(fp8.kvCacheDtype).toBe("fp8");
    // 32 layers × 8 KV heads × 128 × (K and V): 2 bytes each in bf16, 1 in fp8.
    expect(auto.kvBytesPerTokenPerGpu).toBe(2 * 32 * 8 * 128 * 2);
    expect(fp8.kvBytesPerTokenPerGpu).toBe(2 * 32 * 8 * 128 * 1);
    // The memory for KV is the same: only the page size changes.
    const profileRunPeak = Math.max(8192 * (2 * 4096 + 3 * 14_336) * 2, 8192 * 4096 * 2 + 1024 * 128_256 * 14);
    const available = 81_559 * MIB * 0.9 - totalParams(llama8b) * 2 - profileRunPeak - FITTED.nonTorchGiB * GIB;
    expect(auto.numGpuBlocks).toBe(Math.floor(available / (131_072 * 16)));
    expect(fp8.numGpuBlocks).toBe(Math.floor(available / (65_536 * 16)));
    expect(fp8.numGpuBlocks - 2 * auto.numGpuBlocks).toBeGreaterThanOrEqual(0);
    expect(fp8.numGpuBlocks - 2 * auto.numGpuBlocks).toBeLessThanOrEqual(1);
    // vLLM's fp8_e4m3 and fp8_e5m2 are one byte too ("fp8" is e4m3 on CUDA).
    for (const d of ["fp8_e4m3", "fp8_e5m2"] as const) expect(derive(d).numGpuBlocks).toBe(fp8.numGpuBlocks);
    // The weights are what they were.
    expect(fp8.weightBytes).toBe(auto.weightBytes);
  });

  test("lowers a decode step's time by the KV bytes it no longer reads; a compute-bound prefill is unchanged", () => {
    const auto = derive();
    const fp8 = derive("fp8");
    // 256 decodes of 1k-token contexts are memory-bound either way: the step drops by half the KV reads over bandwidth.
    const step = decodes(256, 1024);
    const saved = (256 * 1024 * (131_072 - 65_536)) / auto.cost.bytesPerMs;
    expect(stepMs(timing(auto), step) - stepMs(timing(fp8), step)).toBeCloseTo(saved, 9);
    expect(saved).toBeGreaterThan(5); // of a 23 ms step
    // A lone decode with a short context barely reads KV: the weights dominate.
    const lone = decodes(1, 128);
    expect(stepMs(timing(auto), lone) - stepMs(timing(fp8), lone)).toBeCloseTo((128 * 65_536) / auto.cost.bytesPerMs, 9);
    // A prefill chunk filling the budget is compute-bound: the same time.
    const prefill: StepComposition = {
      ...decodes(0, 0),
      seqs: 1,
      tokens: 8192,
      prefillTokens: 8192,
      prefillSeqs: 1,
      prefillContext: 8192,
      prefillPairs: (8192 * 8193) / 2,
      running: 1,
    };
    expect(stepMs(timing(fp8), prefill)).toBe(stepMs(timing(auto), prefill));
  });

  test("is a profile part: its name gains -kv-fp8, and the named fp8 Qwen3-32B with it holds twice the blocks", () => {
    expect(resolveProfile({ gpu: "h100", arch: "llama-3.1-8b", kvCacheDtype: "fp8" }).name).toBe("h100-llama-3.1-8b-kv-fp8");
    expect(resolveProfile({ kvCacheDtype: "fp8_e5m2" }).name).toBe("h100-llama-3.1-8b-kv-fp8-e5m2");
    expect(resolveProfile({ kvCacheDtype: "auto" }).name).toBe("h100-llama-3.1-8b");
    const rows = listProfiles();
    const plain = rows.find((r) => r.name === "h100-qwen3-32b-fp8")!;
    const kvFp8 = rows.find((r) => r.name === "h100-qwen3-32b-fp8-kv-fp8")!;
    expect([plain.kvCacheDtype, kvFp8.kvCacheDtype]).toEqual(["auto", "fp8"]);
    expect(kvFp8.numGpuBlocks - 2 * plain.numGpuBlocks).toBeGreaterThanOrEqual(0);
    expect(kvFp8.numGpuBlocks - 2 * plain.numGpuBlocks).toBeLessThanOrEqual(1);
    expect(kvFp8.stepDecode256Ms).toBeLessThan(plain.stepDecode256Ms);
    expect(kvFp8.stepBatch1Ms).toBeCloseTo(plain.stepBatch1Ms, 1);
  });

  test("--kv-cache-dtype sets the engine's blocks, its step model and vllm:cache_config_info's cache_dtype", () => {
    const config = (...flags: string[]) => buildSimConfig(parseCommandArgs(simEngineCommand, ["--model", "m", ...flags]), {});
    const auto = config();
    const fp8 = config("--kv-cache-dtype", "fp8");
    expect(auto.fixed.kvCacheDtype).toBe("auto");
    expect(fp8.fixed.kvCacheDtype).toBe("fp8");
    expect(fp8.fixed.profile).toBe("h100-llama-3.1-8b-kv-fp8");
    expect(fp8.fixed.numGpuBlocks).toBe(derive("fp8").numGpuBlocks);
    expect(fp8.live.derived!.kvBytesPerToken).toBe(auto.live.derived!.kvBytesPerToken / 2);
    expect(() => config("--kv-cache-dtype", "int4")).toThrow(UsageError);
    expect(() => config("--kv-cache-dtype", "int4")).toThrow(/expected auto, fp8, fp8_e4m3, fp8_e5m2/);
    const engine = new Engine(fp8.fixed, fp8.live);
    try {
      expect(renderEngineMetrics("vllm-v1", engine, fp8.fixed, performance.now())).toMatch(/vllm:cache_config_info\{[^}]*cache_dtype="fp8"/);
    } finally {
      engine.stop();
    }
  });
});
