/**
 * The models of BLIS's real runs from their config.json: parameter counts as
 * their cards state them, a mixture of experts that reads only the experts
 * its tokens pick, and KV caches sized as the engines reported them.
 */
import { describe, expect, test } from "bun:test";
import { groundTruthProfile } from "../../src/sim/ground-truth.ts";
import { FITTED } from "../../src/sim/profiles/efficiency.ts";
import { findGpu } from "../../src/sim/profiles/gpu-facts.ts";
import { GROUND_TRUTH_RUNS } from "../../src/sim/profiles/ground-truth-runs.ts";
import { activeParams, findArch, totalParams } from "../../src/sim/profiles/model-facts.ts";
import { deriveProfile } from "../../src/sim/profiles/profile.ts";
import { expertBytesRead, loneDecodeMs, stepMs } from "../../src/sim/step-time.ts";

const arch = (id: string) => findArch(id)!;
const billions = (n: number) => n / 1e9;

describe("the real runs' models", () => {
  test("parameter counts follow from config.json: Llama-2 7B and 70B, CodeLlama-34B, Mixtral-8x7B 46.7B of which 12.9B active", () => {
    expect(billions(totalParams(arch("llama-2-7b")))).toBeCloseTo(6.74, 2);
    expect(billions(totalParams(arch("llama-2-70b")))).toBeCloseTo(68.98, 1);
    expect(billions(totalParams(arch("codellama-34b")))).toBeCloseTo(33.7, 1);
    expect(billions(totalParams(arch("mixtral-8x7b")))).toBeCloseTo(46.7, 1);
    // Active: the attention, the router and two of eight experts per token, the LM head (Mistral's card: 12.9B with the embeddings).
    expect(billions(activeParams(arch("mixtral-8x7b")))).toBeGreaterThan(12.5);
    expect(billions(activeParams(arch("mixtral-8x7b")))).toBeLessThan(12.9);
    // A dense model multiplies every parameter but the embedding lookup.
    const dense = arch("llama-2-7b");
    expect(totalParams(dense) - activeParams(dense)).toBe(dense.vocabSize * dense.hiddenSize);
  });

  test("a mixture of experts reads the experts its tokens pick: two of eight for one token, nearly all for a batch", () => {
    const e = { bytes: 8e9, count: 8, perToken: 2, flopsPerToken: 0, columnsPerGpu: 7168, pairColumns: 0 };
    expect(expertBytesRead(e, 0)).toBe(0);
    expect(expertBytesRead(e, 1)).toBeCloseTo(2e9, 0);
    expect(expertBytesRead(e, 2)).toBeCloseTo(8e9 * (1 - 0.75 ** 2), 0);
    expect(expertBytesRead(e, 64)).toBeGreaterThan(0.999 * 8e9);
  });

  test("Mixtral's lone decode costs about a 13B dense model's; a batch of 32 decodes reads all 47B", () => {
    const h100 = findGpu("h100")!;
    const moe = deriveProfile({ gpu: h100, arch: arch("mixtral-8x7b"), tp: 2, dtype: "bf16" });
    const dense70 = deriveProfile({ gpu: h100, arch: arch("llama-2-70b"), tp: 2, dtype: "bf16" });
    // The weights it holds are all 47B (KV room follows), what one token reads is a fraction.
    expect(moe.weightBytes).toBeCloseTo((totalParams(arch("mixtral-8x7b")) * 2) / 2, -3);
    expect(loneDecodeMs(moe.cost)).toBeLessThan(0.5 * loneDecodeMs(dense70.cost));
    const decode = (seqs: number) => ({
      seqs,
      tokens: seqs,
      decodeSeqs: seqs,
      decodeContext: seqs * 600,
      prefillTokens: 0,
      prefillSeqs: 0,
      prefillContext: 0,
      prefillPairs: 0,
      running: seqs,
    });
    const t = { derived: moe.cost, derivedScale: 1, flatDecode: undefined, flatPrefill: undefined };
    // Going from 1 to 32 tokens reads the other six experts: the step grows by more than half.
    expect(stepMs(t, decode(32))).toBeGreaterThan(1.5 * stepMs(t, decode(1)));
    // Past that, more tokens read nothing new: 32 → 64 adds only KV reads and per-sequence costs.
    expect(stepMs(t, decode(64)) / stepMs(t, decode(32))).toBeLessThan(1.25);
  });

  test("each run's KV cache as vLLM sizes it is within 5 % of the blocks its engine reported", () => {
    const seen = new Set<string>();
    for (const run of GROUND_TRUTH_RUNS) {
      if (seen.has(run.arch)) continue;
      seen.add(run.arch);
      const p = groundTruthProfile(run);
      expect({ run: run.id, off: Math.abs(p.numGpuBlocks / run.kvBlocks - 1) < 0.05 }).toEqual({ run: run.id, off: true });
      expect(p.maxNumSeqs).toBe(128);
      expect(p.maxNumBatchedTokens).toBe(2048);
      expect(p.maxModelLen).toBe(4096);
    }
    expect(seen.size).toBe(4);
  });

  test("tensor parallelism pays two ring all-reduces a layer: 2(tp − 1) hops of latency each, 2(tp − 1)/tp of the activations moved", () => {
    const h100 = findGpu("h100")!;
    const tp1 = deriveProfile({ gpu: h100, arch: arch("llama-2-70b"), tp: 1, dtype: "fp8" });
    const tp2 = deriveProfile({ gpu: h100, arch: arch("llama-2-70b"), tp: 2, dtype: "bf16" });
    const tp4 = deriveProfile({ gpu: h100, arch: arch("llama-2-70b"), tp: 4, dtype: "bf16" });
    expect(tp1.cost.commMsPerStep + tp1.cost.commMsPerToken).toBe(0);
    expect(tp2.cost.commMsPerStep).toBeCloseTo(2 * 80 * 2 * FITTED.allReduceHopMs, 9);
    // Six hops a ring of four, two a ring of two.
    expect(tp4.cost.commMsPerStep / tp2.cost.commMsPerStep).toBeCloseTo(3, 9);
    expect(tp4.cost.commMsPerToken / tp2.cost.commMsPerToken).toBeCloseTo(1.5, 9);
  });
});
