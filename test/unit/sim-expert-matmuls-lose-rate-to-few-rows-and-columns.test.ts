/**
 * A mixture of experts' matmuls priced by their shape: rows padded to the
 * fused MoE kernel's block, and a fixed cost per (token, expert) pair that
 * tensor parallelism does not divide — so Qwen3-235B-A22B at TP 8 (192
 * columns of each expert per GPU) computes its experts at a fraction of the
 * dense rate, Mixtral-8x7B at TP 2 (7,168) nearly at it, and a dense model
 * as before.
 */
import { describe, expect, test } from "bun:test";
import { FITTED } from "../../src/sim/profiles/efficiency.ts";
import { findGpu } from "../../src/sim/profiles/gpu-facts.ts";
import { activeParams, findArch } from "../../src/sim/profiles/model-facts.ts";
import { deriveProfile } from "../../src/sim/profiles/profile.ts";
import { emptyComposition, expertMatmulEfficiency, paddedExpertRows, type StepComposition, type StepCostModel, stepMs } from "../../src/sim/step-time.ts";

const profile = (gpu: string, arch: string, tp: number) => deriveProfile({ gpu: findGpu(gpu)!, arch: findArch(arch)!, tp, dtype: "bf16" });
const qwen = profile("a100-80gb", "qwen3-235b-a22b", 8).cost;
const mixtral = profile("h100", "mixtral-8x7b", 2).cost;

/** The same model with every expert FLOP at the dense rate: the step model before the experts were priced apart. */
function denseRated(m: StepCostModel): StepCostModel {
  const e = m.experts!;
  return { ...m, flopsPerToken: m.flopsPerToken + e.flopsPerToken, experts: { ...e, flopsPerToken: 0 } };
}

function prefill(tokens: number): StepComposition {
  return {
    ...emptyComposition(),
    seqs: 1,
    tokens,
    prefillTokens: tokens,
    prefillSeqs: 1,
    prefillContext: tokens,
    prefillPairs: (tokens * (tokens + 1)) / 2,
    running: 1,
  };
}

function decode(seqs: number, context: number): StepComposition {
  return { ...emptyComposition(), seqs, tokens: seqs, decodeSeqs: seqs, decodeContext: seqs * context, running: seqs };
}

const timing = (m: StepCostModel) => ({ derived: m, derivedScale: 1, flatDecode: undefined, flatPrefill: undefined });

describe("the experts' matmul rate", () => {
  test("rows are padded to the kernel's block: half a block of 16 to 64 lost on average, a whole block of 16 under it", () => {
    expect(paddedExpertRows(1)).toBe(16);
    expect(paddedExpertRows(16)).toBe(24);
    expect(paddedExpertRows(128)).toBe(160);
    expect(paddedExpertRows(512)).toBe(544);
  });

  test("falls with fewer rows per expert: Qwen3-235B's 128 experts get 128 rows each from 2,048 tokens, 16 from 256", () => {
    const e = qwen.experts!;
    const rates = [64, 256, 2048, 8192].map((t) => expertMatmulEfficiency(e, t));
    for (let i = 1; i < rates.length; i++) expect(rates[i]).toBeGreaterThan(rates[i - 1]!);
    // 2,048 tokens × 8 experts each over 128 experts, all picked: 128 rows padded to 160, 192 columns plus 550 a pair.
    expect(e.columnsPerGpu).toBe(1536 / 8);
    expect(expertMatmulEfficiency(e, 2048)).toBeCloseTo((128 * 192) / (160 * 192 + 128 * FITTED.expertPairColumns), 3);
  });

  test("falls with fewer columns per GPU: at 512 rows an expert, Mixtral at TP 2 keeps nine tenths of the dense rate, Qwen3-235B at TP 8 under a third", () => {
    // 2,048 tokens × 2 of 8 experts, 8,192 tokens × 8 of 128: 512 rows each.
    expect(expertMatmulEfficiency(mixtral.experts!, 2048)).toBeGreaterThan(0.85);
    expect(expertMatmulEfficiency(profile("h100", "qwen3-235b-a22b", 8).cost.experts!, 8192)).toBeLessThan(0.3);
  });
});

describe("the step", () => {
  test("Qwen3-235B's 2,048-token prefill step on eight A100s costs more than at the dense rate by its experts' FLOPs over their rate", () => {
    const before = stepMs(timing(denseRated(qwen)), prefill(2048));
    const after = stepMs(timing(qwen), prefill(2048));
    const e = qwen.experts!;
    const extra = ((2048 * e.flopsPerToken) / qwen.flopsPerMs) * (1 / expertMatmulEfficiency(e, 2048) - 1);
    expect(after - before).toBeCloseTo(extra, 6);
    // The experts were 37 of the step's ~95 ms at the dense rate; at a quarter of it the step doubles.
    expect(after / before).toBeGreaterThan(1.9);
  });

  test("a step a mixture of experts spends reading its weights is unchanged: Mixtral's 32 decodes, Qwen3-235B's lone decode", () => {
    expect(stepMs(timing(mixtral), decode(32, 600))).toBe(stepMs(timing(denseRated(mixtral)), decode(32, 600)));
    expect(stepMs(timing(qwen), decode(1, 128))).toBe(stepMs(timing(denseRated(qwen)), decode(1, 128)));
  });

  test("a dense model has no experts to price apart: its FLOPs are 2 × its active parameters, as before", () => {
    const llama = profile("h100", "llama-2-70b", 4);
    expect(llama.cost.experts).toBeUndefined();
    expect(llama.cost.flopsPerToken).toBe((2 * activeParams(findArch("llama-2-70b")!)) / 4);
  });
});
