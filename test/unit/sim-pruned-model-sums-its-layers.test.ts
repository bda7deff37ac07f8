/**
 * A model whose layers differ (Llama-3.3-Nemotron-Super-49B, pruned from
 * Llama-3.3-70B) derives its weights, KV cache, FLOPs and all-reduces as
 * sums over its layers, checked against sums done by hand from its
 * config.json; the models whose layers are alike derive exactly the figures
 * they derived before layers could differ.
 */
import { describe, expect, test } from "bun:test";
import { adapterBytes, adapterCostModel } from "../../src/sim/lora/load-cost.ts";
import { listProfiles, resolveProfile } from "../../src/sim/profiles/catalog.ts";
import { FITTED } from "../../src/sim/profiles/efficiency.ts";
import { findGpu, GIB, MIB } from "../../src/sim/profiles/gpu-facts.ts";
import { decoderLayers } from "../../src/sim/profiles/model-arch.ts";
import { activeParams, denseParams, expertParams, findArch, kvBytesPerToken, totalParams } from "../../src/sim/profiles/model-facts.ts";
import { deriveProfile } from "../../src/sim/profiles/profile.ts";
import { loneDecodeMs, stepMs } from "../../src/sim/step-time.ts";

const arch = (id: string) => findArch(id)!;
const SUPER = "llama-3.3-nemotron-super-49b";

// By hand from config.json: hidden 8192, 64 heads of 128, vocabulary 128,256, untied.
// 49 layers keep attention (n_heads_in_group 8: 8 KV heads), 31 have none (attention.no_op).
// MLP widths from ffn_mult (⌊2 × mult × 8192 ÷ 3⌋ up to a multiple of 256), counted over the 80 layers:
// 5.25 → 28,672 × 49; 2.625 → 14,336 × 6; 3.28125 → 17,920 × 1; 1.3125 → 7,168 × 10; 1.0 → 5,632 × 8; 0.5 → 2,816 × 6.
const H = 8192;
const ATTENTION_LAYERS = 49;
const ATTENTION_PARAMS = H * 8192 + 2 * H * 8 * 128 + 8192 * H; // q, k and v, o
const MLP_WIDTHS = 28_672 * 49 + 14_336 * 6 + 17_920 + 7_168 * 10 + 5_632 * 8 + 2_816 * 6;
const EMBED = 128_256 * H;
const LAYER_PARAMS = ATTENTION_LAYERS * ATTENTION_PARAMS + 3 * H * MLP_WIDTHS;

describe("a pruned model sums its layers", () => {
  test("its layers are config.json's block_configs: 80, 49 with 8 KV heads, 31 without attention, MLPs 2,816 to 28,672 wide", () => {
    const layers = decoderLayers(arch(SUPER));
    expect(layers).toHaveLength(80);
    expect(layers.filter((l) => l.kvHeads === 8)).toHaveLength(49);
    expect(layers.filter((l) => l.kvHeads === 0)).toHaveLength(31);
    expect(layers.reduce((s, l) => s + l.intermediateSize, 0)).toBe(MLP_WIDTHS);
    expect(new Set(layers.map((l) => l.intermediateSize))).toEqual(new Set([28_672, 14_336, 17_920, 7_168, 5_632, 2_816]));
    // Its first and last layers as config.json lists them: ffn_mult 2.625 with attention, 5.25 with attention.
    expect(layers[0]).toEqual({ kvHeads: 8, intermediateSize: 14_336 });
    expect(layers[6]).toEqual({ kvHeads: 0, intermediateSize: 14_336 });
    expect(layers[79]).toEqual({ kvHeads: 8, intermediateSize: 28_672 });
  });

  test("parameters, KV bytes and FLOPs are the per-layer sums: 49.87 B parameters, the model card's 49B", () => {
    const a = arch(SUPER);
    expect(totalParams(a)).toBe(LAYER_PARAMS + 2 * EMBED);
    expect(totalParams(a) / 1e9).toBeCloseTo(49.87, 2);
    expect(activeParams(a)).toBe(LAYER_PARAMS + EMBED);
    expect(denseParams(a)).toBe(activeParams(a));
    expect(expertParams(a)).toBe(0);
    // K and V of the 49 layers with attention only.
    expect(kvBytesPerToken(a, 2)).toBe(ATTENTION_LAYERS * 2 * 8 * 128 * 2);
  });

  test("its profile on 2 × H100 splits those sums; attention and all-reduces count only the layers that have them", () => {
    const p = deriveProfile({ gpu: findGpu("h100")!, arch: arch(SUPER), tp: 2, dtype: "bf16" });
    expect(p.weightBytes).toBe(((LAYER_PARAMS + 2 * EMBED) * 2) / 2);
    expect(p.kvBytesPerTokenPerGpu).toBe((ATTENTION_LAYERS * 2 * 8 * 128 * 2) / 2);
    expect(p.cost.weightBytes).toBe(((LAYER_PARAMS + EMBED) * 2) / 2);
    expect(p.cost.flopsPerToken).toBe((2 * (LAYER_PARAMS + EMBED)) / 2);
    expect(p.cost.attnFlopsPerPair).toBe((4 * ATTENTION_LAYERS * 64 * 128) / 2);
    // 49 all-reduces after attention and 80 after MLPs, each a ring of 2 hops at TP 2.
    expect(p.cost.commMsPerStep).toBe((ATTENTION_LAYERS + 80) * 2 * 1 * FITTED.allReduceHopMs);
    // The KV cache: the budget less weights, the profile run's peak (the widest MLP's activations or the sampler's
    // logits, whichever is larger) and non-torch memory.
    const profileRunPeak = Math.max(8192 * (2 * H + (3 * 28_672) / 2) * 2, 8192 * H * 2 + 1024 * 128_256 * 14);
    const available = 81_559 * MIB * 0.9 - p.weightBytes - profileRunPeak - FITTED.nonTorchGiB * GIB;
    expect(p.numGpuBlocks).toBe(Math.floor(available / (p.kvBytesPerTokenPerGpu * 16)));
  });

  // Llama-3.3-70B has Llama-3.1-70B's architecture.
  test("pruned from Llama-3.3-70B, it reads 70 % of its weights a step and holds 61 % of its KV bytes a token", () => {
    const h100 = findGpu("h100")!;
    const pruned = deriveProfile({ gpu: h100, arch: arch(SUPER), tp: 2, dtype: "bf16" });
    const parent = deriveProfile({ gpu: h100, arch: arch("llama-3.1-70b"), tp: 2, dtype: "bf16" });
    expect(pruned.cost.weightBytes / parent.cost.weightBytes).toBeCloseTo(0.7, 1);
    expect(pruned.kvBytesPerTokenPerGpu / parent.kvBytesPerTokenPerGpu).toBe(49 / 80);
    expect(pruned.numGpuBlocks).toBeGreaterThan(parent.numGpuBlocks);
    expect(loneDecodeMs(pruned.cost)).toBeLessThan(loneDecodeMs(parent.cost));
  });

  test("a LoRA adapter has no attention projections on the layers without attention", () => {
    const m = adapterCostModel(arch(SUPER), "h200", 1);
    expect(m.projections).toBe(4 * ATTENTION_LAYERS + 3 * 80);
    const attention = H + 8192 + 2 * (H + 8 * 128) + 8192 + H;
    expect(m.projectionFeatures).toBe(ATTENTION_LAYERS * attention + 80 * 3 * H + 3 * MLP_WIDTHS);
    expect(adapterBytes(m, 16)).toBe(16 * m.projectionFeatures * 2);
  });

  test("it is a named profile on one H200 and in --list-profiles", () => {
    const { name, profile } = resolveProfile({ profile: "h200-llama-3.3-nemotron-super-49b" });
    expect(name).toBe("h200-llama-3.3-nemotron-super-49b");
    expect(profile.weightBytes / GIB).toBeLessThan(141 * 0.9);
    expect(listProfiles().some((r) => r.arch === SUPER && r.gpu === "h100" && r.tp === 2)).toBe(true);
  });
});

/** Figures the profiles derived before a model's layers could differ, printed with full precision at that commit. */
describe("models whose layers are alike derive what they did", () => {
  test("parameter counts and KV bytes per token", () => {
    const before: Record<string, [number, number, number, number, number]> = {
      "llama-3.1-8b": [8029995008, 7504658432, 7504658432, 0, 131072],
      "llama-3.1-70b": [70552387584, 69501714432, 69501714432, 0, 327680],
      "qwen2.5-0.5b": [493961216, 493961216, 493961216, 0, 12288],
      "qwen3-8b": [8190427136, 7568097280, 7568097280, 0, 147456],
      "qwen3-32b": [32761446400, 31983534080, 31983534080, 0, 262144],
      "llama-2-7b": [6738149376, 6607077376, 6607077376, 0, 524288],
      "llama-2-70b": [68975329280, 68713185280, 68713185280, 0, 327680],
      "codellama-34b": [33743175680, 33481031680, 33481031680, 0, 196608],
      "mixtral-8x7b": [46702526464, 12748587008, 1474297856, 45097156608, 131072],
    };
    for (const [id, figures] of Object.entries(before)) {
      const a = arch(id);
      expect([totalParams(a), activeParams(a), denseParams(a), expertParams(a), kvBytesPerToken(a, 2)]).toEqual(figures);
    }
  });

  test("KV blocks, step costs and step times of the profiles", () => {
    const before: [string, number, number, number, number, number, number][] = [
      // name, KV blocks, lone decode ms, 256 decodes ms, budget prefill ms, weight bytes per GPU, KV bytes per token per GPU.
      // The KV blocks are those of the profile run as vLLM's code sizes it (profile-run-memory.ts: the larger of the
      // forward's and the sampler's peak, not their sum) with 1.0 GiB of non-torch memory; they were 27,673, 59,423,
      // 9,727, 29,590 and 26,499 with activations and logits summed and 1.5 GiB.
      ["h100-llama-3.1-8b", 27622, 6.699012327374119, 23.06454001377727, 227.34763538278526, 16059990016, 131072],
      ["l4-qwen2.5-0.5b", 60434, 5.394524893772894, 22.28812419047619, 30.6791151456382, 987922432, 12288],
      ["h100-qwen3-32b-fp8", 9744, 12.272571268492701, 39.903626641299, 478.51836295305145, 32761446400, 262144],
      ["h100x4-llama-3.1-70b", 29484, 17.11750768426002, 31.486686488261988, 569.4837891871924, 35276193792, 81920],
      // Its 8,192-token step computes its experts at their shape's rate (2,048 rows an expert, 7,168 columns a GPU): 193.57 ms at the dense rate.
      ["h100x2-mixtral-8x7b", 27040, 6.480638076407705, 28.60541971126638, 207.26407841408766, 46702526464, 65536],
    ];
    const rows = listProfiles();
    for (const [name, blocks, lone, decode256, budget, weights, kv] of before) {
      const r = rows.find((x) => x.name === name)!;
      expect([r.numGpuBlocks, r.stepBatch1Ms, r.stepDecode256Ms, r.stepBudgetMs]).toEqual([blocks, lone, decode256, budget]);
      const { profile } = resolveProfile(name.includes("mixtral") ? { gpu: "h100", arch: "mixtral-8x7b", tp: 2 } : { profile: name });
      expect([profile.weightBytes, profile.kvBytesPerTokenPerGpu]).toEqual([weights, kv]);
    }
    const tp4 = resolveProfile({ profile: "h100x4-llama-3.1-70b" }).profile.cost;
    expect([tp4.attnFlopsPerPair, tp4.commMsPerStep, tp4.commMsPerToken]).toEqual([655360, 3.9360000000000004, 0.008738133333333334]);
    const t = { derived: tp4, derivedScale: 1, flatDecode: undefined, flatPrefill: undefined };
    expect(
      stepMs(t, { seqs: 1, tokens: 1, decodeSeqs: 1, decodeContext: 128, prefillTokens: 0, prefillSeqs: 0, prefillContext: 0, prefillPairs: 0, running: 1 }),
    ).toBe(17.11750768426002);
  });

  test("with more GPUs than KV heads each GPU keeps one head of every layer, as vLLM's LlamaAttention", () => {
    // Qwen2.5-0.5B: 24 layers, 2 KV heads of 64; at TP 7 (14 attention heads) each GPU holds 1 KV head, not 2 ÷ 7.
    const p = deriveProfile({ gpu: findGpu("h100")!, arch: arch("qwen2.5-0.5b"), tp: 7, dtype: "bf16" });
    expect(p.kvBytesPerTokenPerGpu).toBe(24 * 2 * 1 * 64 * 2);
  });

  test("a LoRA adapter's size on Llama-3.1-8B: 83,886,080 bytes at rank 16", () => {
    expect(adapterBytes(adapterCostModel(arch("llama-3.1-8b"), "h100", 1), 16)).toBe(83_886_080);
  });
});
