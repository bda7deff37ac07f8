/**
 * Replaying a real run as its load generator sent it: inference-perf's
 * arrivals and shared-prefix prompts, an open loop whose client gives up
 * after its timeout, and the figures measured as that client measures them.
 */
import { describe, expect, test } from "bun:test";
import { mean } from "../../src/sim/closed-loop.ts";
import { EngineCore } from "../../src/sim/engine-core.ts";
import { clientFigures, sharedPrefixPrompts, stageArrivals } from "../../src/sim/ground-truth.ts";
import { type OpenLoopRequest, runOpenLoop } from "../../src/sim/open-loop.ts";
import { GROUND_TRUTH_RUNS } from "../../src/sim/profiles/ground-truth-runs.ts";
import { NO_FRONTEND } from "../../src/sim/step-time.ts";

function lcg(seed: number): () => number {
  let s = seed;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s / 0x100000000;
  };
}

/** Every step with decodes 10 ms. */
function core(maxNumSeqs = 8): EngineCore {
  return new EngineCore(
    { maxNumSeqs, maxNumBatchedTokens: 4096, numGpuBlocks: 4000, blockSize: 16, maxModelLen: 4096 },
    {
      timing: { derived: undefined, derivedScale: 1, flatDecode: { itlMs: 10, batchSlowdown: 0, maxNumSeqs }, flatPrefill: { msPerToken: 0 } },
      jitter: 0,
      frontendJitterMs: 0,
      frontend: NO_FRONTEND,
      firstTokenDelayMs: 0,
    },
  );
}

const prompt = { count: 32, ids: new Int32Array(0), blockHashes: [], state: 1, continued: 0 };

describe("a real run's replay", () => {
  test("a stage's arrivals are rate × duration Poisson gaps that end exactly at the stage's end", () => {
    const at = stageArrivals(8, 600, lcg(7));
    expect(at.length).toBe(4800);
    expect(at.at(-1)).toBeCloseTo(600_000, 6);
    const gaps = at.map((t, i) => t - (i > 0 ? at[i - 1]! : 0));
    const m = mean(gaps);
    const sd = Math.sqrt(mean(gaps.map((g) => (g - m) ** 2)));
    expect(m).toBeCloseTo(125, 6);
    // Exponential gaps: their spread is their mean.
    expect(sd / m).toBeGreaterThan(0.9);
    expect(sd / m).toBeLessThan(1.1);
  });

  test("shared-prefix prompts: 10 groups of 10, BOS and a system prompt shared within a group, the run's measured length", () => {
    const run = GROUND_TRUTH_RUNS.find((r) => r.id === "llama-2-7b-tp1-codegen")!;
    const prompts = sharedPrefixPrompts(run, run.stages[0]!.promptTokensMean, 1);
    expect(prompts.length).toBe(100);
    expect(new Set(prompts.map((p) => p.count))).toEqual(new Set([Math.round(run.stages[0]!.promptTokensMean)]));
    // The system prompt (~104 tokens with BOS) fills 6 full blocks: 10 chains of them, one per group.
    const prefixes = new Set(prompts.map((p) => p.blockHashes[5]));
    expect(prefixes.size).toBe(10);
    // Each prompt's own question makes every full chain distinct.
    expect(new Set(prompts.map((p) => p.blockHashes.at(-1))).size).toBe(100);
  });

  test("an open loop sends on time whatever the engine does, and a client that waits too long gives up and frees its slot", () => {
    const c = core(2);
    // Ten requests at once, two slots, each 20 decodes of 10 ms: the last ones wait ~1 s; the client gives up at 500 ms.
    const reqs: OpenLoopRequest[] = Array.from({ length: 10 }, () => ({ at: 0, prompt, outputTokens: 20 }));
    const { records, endAt } = runOpenLoop(c, 0, reqs, 500);
    expect(records.every((r) => r.sentAt === 0)).toBe(true);
    const ok = records.filter((r) => r.ok);
    const failed = records.filter((r) => !r.ok);
    expect(ok.length).toBeGreaterThan(0);
    expect(failed.length).toBeGreaterThan(0);
    for (const r of failed) expect(r.endAt).toBe(500);
    for (const r of ok) expect(r.tokens).toBe(20);
    // The engine was left with nothing: every timed-out request was aborted, its blocks freed.
    expect(c.runningCount + c.waitingCount).toBe(0);
    expect(c.kv.free).toBe(4000);
    expect(endAt).toBeLessThanOrEqual(500);
  });

  test("the client's figures: TTFT and E2E per finished request, ITL over every streamed line (two a token and two for [DONE])", () => {
    const f = clientFigures([
      { sentAt: 0, firstAt: 30, lastAt: 30 + 99 * 10, endAt: 1020, tokens: 100, ok: true },
      { sentAt: 100, firstAt: 150, lastAt: 150 + 99 * 10, endAt: 1140, tokens: 100, ok: true },
      { sentAt: 200, firstAt: -1, lastAt: -1, endAt: 300_200, tokens: 0, ok: false },
    ]);
    expect(f.ok).toBe(2);
    expect(f.failed).toBe(1);
    expect(f.ttft_mean_ms).toBe(40);
    expect(f.e2e_mean_ms).toBe((1020 + 1040) / 2);
    // 990 ms between first and last token over 2 × 100 + 1 line gaps: about half the 10 ms a token.
    expect(f.itl_mean_ms).toBeCloseTo(990 / 201, 9);
  });
});
