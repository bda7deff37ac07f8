/** Profiles follow from public figures: parameter counts from config.json, vLLM's defaults by GPU, KV blocks from memory. */
import { describe, expect, test } from "bun:test";
import { listProfiles, resolveProfile } from "../../src/sim/profiles/catalog.ts";
import { FITTED } from "../../src/sim/profiles/efficiency.ts";
import { findGpu, GIB, MIB } from "../../src/sim/profiles/gpu-facts.ts";
import { findArch, kvBytesPerToken, totalParams } from "../../src/sim/profiles/model-facts.ts";
import { deriveProfile, ProfileError, schedulerDefaults } from "../../src/sim/profiles/profile.ts";
import { loneDecodeMs } from "../../src/sim/step-time.ts";

const gpu = (id: string) => findGpu(id)!;
const arch = (id: string) => findArch(id)!;

describe("sim profile derivation", () => {
  test("parameter counts follow from config.json as the model cards state them", () => {
    const billions = (id: string) => totalParams(arch(id)) / 1e9;
    expect(billions("llama-3.1-8b")).toBeCloseTo(8.03, 2);
    expect(billions("llama-3.1-70b")).toBeCloseTo(70.55, 1);
    expect(billions("qwen2.5-0.5b")).toBeCloseTo(0.494, 3);
    expect(billions("qwen3-8b")).toBeCloseTo(8.19, 1);
    expect(billions("qwen3-32b")).toBeCloseTo(32.8, 1);
    // K and V, per layer, per KV head: Llama-3.1-8B holds 128 KiB per token in bf16.
    expect(kvBytesPerToken(arch("llama-3.1-8b"), 2)).toBe(2 * 32 * 8 * 128 * 2);
  });

  test("vLLM's scheduler defaults by device: ≥ 70 GiB and not an A100 get 1024 seqs and an 8192-token budget", () => {
    expect(schedulerDefaults(gpu("h100"))).toEqual({ maxNumSeqs: 1024, maxNumBatchedTokens: 8192 });
    expect(schedulerDefaults(gpu("h200"))).toEqual({ maxNumSeqs: 1024, maxNumBatchedTokens: 8192 });
    expect(schedulerDefaults(gpu("b200"))).toEqual({ maxNumSeqs: 1024, maxNumBatchedTokens: 8192 });
    expect(schedulerDefaults(gpu("a100-80gb"))).toEqual({ maxNumSeqs: 256, maxNumBatchedTokens: 2048 });
    expect(schedulerDefaults(gpu("l40s"))).toEqual({ maxNumSeqs: 256, maxNumBatchedTokens: 2048 });
    expect(schedulerDefaults(gpu("l4"))).toEqual({ maxNumSeqs: 256, maxNumBatchedTokens: 2048 });
  });

  test("KV blocks are what is left of gpu_memory_utilization × memory after weights, the profile run's peak and non-torch memory", () => {
    const p = deriveProfile({ gpu: gpu("h100"), arch: arch("llama-3.1-8b"), tp: 1, dtype: "bf16" });
    const budget = 81_559 * MIB * 0.9;
    const weights = totalParams(arch("llama-3.1-8b")) * 2;
    // vLLM's profile run peaks at the larger of its forward pass (the residual, the layer's input, gate_up's output and
    // SiluAndMul's, bf16) and its sampler (the kept hidden states, then 14 bytes per logit for 1,024 requests).
    const forward = 8192 * (2 * 4096 + 3 * 14_336) * 2;
    const sampler = 8192 * 4096 * 2 + 1024 * 128_256 * 14;
    expect(sampler).toBeGreaterThan(forward);
    const available = budget - weights - Math.max(forward, sampler) - FITTED.nonTorchGiB * GIB;
    expect(p.numGpuBlocks).toBe(Math.floor(available / (131_072 * 16)));
    expect(p.maxModelLen).toBe(131_072);
    // fp8 weights take half the bytes and leave the KV cache more room.
    const fp8 = deriveProfile({ gpu: gpu("h100"), arch: arch("llama-3.1-8b"), tp: 1, dtype: "fp8" });
    expect(fp8.weightBytes).toBe(p.weightBytes / 2);
    expect(fp8.numGpuBlocks).toBeGreaterThan(p.numGpuBlocks);
  });

  test("Llama-3.1-70B on 4 × H100 holds about the 461,376 KV tokens per pod llm-d's 37-capacity run reports", () => {
    const { profile } = resolveProfile({ profile: "h100x4-llama-3.1-70b" });
    const tokens = profile.numGpuBlocks * profile.blockSize;
    expect(Math.abs(tokens / 461_376 - 1)).toBeLessThan(0.05);
  });

  test("a lone decode reads the weights once: its time is the weights over effective bandwidth plus the step's overheads", () => {
    const p = deriveProfile({ gpu: gpu("a100-40gb"), arch: arch("llama-3.1-8b"), tp: 1, dtype: "bf16" });
    const readMs = p.cost.weightBytes / ((1_555e9 * FITTED.bandwidthEfficiency) / 1000);
    expect(loneDecodeMs(p.cost)).toBeGreaterThan(readMs + FITTED.stepOverheadMs);
    expect(loneDecodeMs(p.cost)).toBeLessThan(readMs + FITTED.stepOverheadMs + 0.2);
    // Tensor parallelism splits the weights and adds all-reduces.
    const tp2 = deriveProfile({ gpu: gpu("h100"), arch: arch("llama-3.1-70b"), tp: 2, dtype: "bf16" });
    const tp4 = deriveProfile({ gpu: gpu("h100"), arch: arch("llama-3.1-70b"), tp: 4, dtype: "bf16" });
    expect(tp4.cost.weightBytes).toBeCloseTo(tp2.cost.weightBytes / 2, 0);
    expect(tp4.cost.commMsPerStep).toBeGreaterThan(0);
  });

  test("a model that does not fit is refused with what would make it fit", () => {
    expect(() => deriveProfile({ gpu: gpu("l4"), arch: arch("llama-3.1-70b"), tp: 1, dtype: "bf16" })).toThrow(ProfileError);
    expect(() => deriveProfile({ gpu: gpu("l4"), arch: arch("llama-3.1-70b"), tp: 1, dtype: "bf16" })).toThrow(/larger --tp or --dtype fp8/);
    expect(() => resolveProfile({ gpu: "h100", arch: "llama-3.1-8b", tp: 3 })).toThrow(/not divisible/);
  });

  test("--list-profiles covers every GPU and model the issue names", () => {
    const rows = listProfiles();
    for (const g of ["a100-40gb", "a100-80gb", "h100", "h200", "l4", "l40s", "b200"]) expect(rows.some((r) => r.gpu === g)).toBe(true);
    for (const a of ["llama-3.1-8b", "llama-3.1-70b", "qwen2.5-0.5b", "qwen3-8b", "qwen3-32b"]) expect(rows.some((r) => r.arch === a)).toBe(true);
    for (const r of rows) {
      expect(r.stepBatch1Ms).toBeGreaterThan(0);
      expect(r.stepBudgetMs).toBeGreaterThan(r.stepBatch1Ms);
      expect(r.numGpuBlocks).toBeGreaterThan(0);
    }
  });
});
