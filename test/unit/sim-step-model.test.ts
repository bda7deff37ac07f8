/** The engine core steps as vLLM's V1 scheduler: decodes and prefill chunks share a step, the budget caps it, KV pressure preempts. */
import { describe, expect, test } from "bun:test";
import { type CoreConfig, type CoreTiming, EngineCore } from "../../src/sim/engine-core.ts";
import { KvCache } from "../../src/sim/kv-cache.ts";
import { type SeqSink, Sequence } from "../../src/sim/sequence.ts";
import { type PlannerHost, planStep } from "../../src/sim/step-planner.ts";
import { NO_FRONTEND, type StepTiming, stepMs } from "../../src/sim/step-time.ts";
import { WaitQueue } from "../../src/sim/wait-queue.ts";

/** Flat timing: a decode step 10 ms, prefill 0.1 ms per token on top. */
const FLAT: StepTiming = { derived: undefined, derivedScale: 1, flatDecode: { itlMs: 10, batchSlowdown: 0, maxNumSeqs: 8 }, flatPrefill: { msPerToken: 0.1 } };
const timing = (t: StepTiming = FLAT): CoreTiming => ({ timing: t, jitter: 0, frontendJitterMs: 0, frontend: NO_FRONTEND, firstTokenDelayMs: 0 });
const config = (over: Partial<CoreConfig> = {}): CoreConfig => ({
  maxNumSeqs: 8,
  maxNumBatchedTokens: 256,
  numGpuBlocks: 1000,
  blockSize: 16,
  maxModelLen: 4096,
  ...over,
});

/** Records when each token came (virtual ms). */
class Clocked implements SeqSink {
  times: number[] = [];
  finished = false;
  constructor(private readonly now: () => number) {}
  token() {
    this.times.push(this.now());
  }
  finish() {
    this.finished = true;
  }
  cut() {}
  gaps(): number[] {
    return this.times.slice(1).map((t, i) => t - this.times[i]!);
  }
}

/** Runs the core on a virtual clock until nothing is due (or `until`). */
function run(core: EngineCore, clock: { t: number }, until = Infinity): void {
  for (let i = 0; i < 1_000_000; i++) {
    const t = core.nextEventAt();
    if (t === Infinity || t > until) return;
    clock.t = t;
    core.advance(t);
  }
}

function req(sink: SeqSink, promptTokens: number, outputTokens: number, hashes: bigint[] = []) {
  return {
    prompt: { count: promptTokens, ids: new Int32Array(promptTokens), blockHashes: hashes, state: promptTokens, continued: 0 },
    outputTokens,
    finishReason: "length" as const,
    stallAfter: -1,
    cutAfter: -1,
    intervalMs: 0,
    sink,
  };
}

describe("sim step model", () => {
  test("a prefill chunk in a step lengthens that step's decode gap; the other gaps stay at the decode step", () => {
    const clock = { t: 0 };
    const core = new EngineCore(config(), timing());
    const decoding = new Clocked(() => clock.t);
    core.submit(req(decoding, 10, 30), 0);
    run(core, clock, 100);
    // A 1,000-token prompt arrives: four chunks of ≤ 256 tokens, each in a step with the running decode.
    const newcomer = new Clocked(() => clock.t);
    core.submit(req(newcomer, 1000, 2), clock.t);
    run(core, clock);
    const gaps = decoding.gaps();
    const slow = gaps.filter((g) => g > 10.5);
    expect(slow.length).toBe(4);
    // A full chunk costs 255 tokens × 0.1 ms more (the decode takes one token of the 256 budget).
    expect(Math.max(...slow)).toBeCloseTo(10 + 25.5, 5);
    expect(gaps.filter((g) => g <= 10.5).every((g) => Math.abs(g - 10) < 1e-9)).toBe(true);
    expect(newcomer.finished && decoding.finished).toBe(true);
  });

  test("the token budget caps a step: running requests first, then prefill chunks into what is left", () => {
    const kv = new KvCache(1000, 16);
    const waiting = new WaitQueue();
    const running: Sequence[] = [];
    const host: PlannerHost = {
      preempt: () => {
        throw new Error("no preemption expected");
      },
      admit: (s) => {
        s.phase = "running";
        running.push(s);
      },
    };
    const sink: SeqSink = { token() {}, finish() {}, cut() {} };
    // Three decodes already running, then two prompts of 150 tokens waiting.
    for (let i = 0; i < 3; i++) {
      const s = new Sequence(req(sink, 20, 10), 0);
      s.phase = "running";
      s.generated = 1;
      s.computed = 20;
      s.blocks = kv.allocateAfter([], 2)!;
      running.push(s);
    }
    for (let i = 0; i < 2; i++) {
      const s = new Sequence(req(sink, 150, 10), 0);
      s.phase = "waiting";
      waiting.push(s);
    }
    const plan = planStep(running, waiting, kv, { maxNumSeqs: 8, maxNumBatchedTokens: 200, blockSize: 16 }, host);
    expect(plan.tokens).toEqual([1, 1, 1, 150, 47]);
    expect(plan.tokens.reduce((a, b) => a + b, 0)).toBe(200);
    expect(plan.composition).toMatchObject({ seqs: 5, tokens: 200, decodeSeqs: 3, prefillTokens: 197, prefillSeqs: 2 });
    // The second prompt holds blocks for its first chunk only.
    expect(plan.seqs[4]!.blocks.length).toBe(Math.ceil(47 / 16));
    expect(waiting.live).toBe(0);
  });

  test("a request is capped by max_num_seqs even with budget left", () => {
    const clock = { t: 0 };
    const core = new EngineCore(config({ maxNumSeqs: 2 }), timing());
    const sinks = [0, 1, 2].map(() => new Clocked(() => clock.t));
    for (const s of sinks) core.submit(req(s, 10, 3), 0);
    run(core, clock, 0);
    expect(core.runningCount).toBe(2);
    expect(core.waitingCount).toBe(1);
    run(core, clock);
    expect(sinks.every((s) => s.finished)).toBe(true);
  });

  test("under KV pressure the newest running request is preempted, recomputed later, and every answer completes", () => {
    const clock = { t: 0 };
    // 12 blocks of 16 tokens: three 60-token prompts fit (4 blocks each) but cannot all grow.
    const core = new EngineCore(config({ numGpuBlocks: 12, maxNumBatchedTokens: 512 }), timing());
    const sinks = [0, 1, 2].map(() => new Clocked(() => clock.t));
    for (const s of sinks) core.submit(req(s, 60, 40), 0);
    run(core, clock);
    expect(core.stats.preemptions).toBeGreaterThan(0);
    expect(sinks.every((s) => s.finished && s.times.length === 40)).toBe(true);
    // The oldest request was never preempted: its tokens kept the decode cadence.
    expect(sinks[0]!.gaps().every((g) => g <= 10 + 1e-9)).toBe(true);
    expect(core.kv.used).toBe(0);
  });

  test("a step's time follows its composition: flat parts add, the derived model is a roofline plus overheads", () => {
    const c = { seqs: 4, tokens: 4, decodeSeqs: 4, decodeContext: 400, prefillTokens: 0, prefillSeqs: 0, prefillContext: 0, prefillPairs: 0, running: 4 };
    expect(stepMs(FLAT, c)).toBe(10);
    expect(stepMs(FLAT, { ...c, seqs: 5, tokens: 104, prefillTokens: 100, prefillSeqs: 1, prefillContext: 100, prefillPairs: 5050 })).toBeCloseTo(20, 9);
    const m = {
      weightBytes: 1e9,
      kvBytesPerToken: 1e5,
      flopsPerToken: 2e9,
      attnFlopsPerPair: 1e6,
      bytesPerMs: 1e9,
      flopsPerMs: 1e12,
      stepOverheadMs: 1,
      perSeqOverheadMs: 0.1,
      commMsPerToken: 0,
      commMsPerStep: 0,
    };
    const derived: StepTiming = { derived: m, derivedScale: 1, flatDecode: undefined, flatPrefill: undefined };
    // Memory-bound: 1e9 + 400 × 1e5 bytes at 1e9 per ms = 1.04 ms, + 1 + 4 × 0.1.
    expect(stepMs(derived, c)).toBeCloseTo(1 + 0.4 + 1.04, 9);
    // A 4,000-token prefill is compute-bound: 4,004 × 2e9 + pairs × 1e6 FLOPs at 1e12 per ms.
    const big = { ...c, seqs: 5, tokens: 4004, prefillTokens: 4000, prefillSeqs: 1, prefillContext: 4000, prefillPairs: (4000 * 4001) / 2 };
    const computeMs = (4004 * 2e9 + (400 + (4000 * 4001) / 2) * 1e6) / 1e12;
    expect(stepMs(derived, big)).toBeCloseTo(1 + 0.5 + computeMs, 9);
    // --itl-ms scales the derived clock.
    expect(stepMs({ ...derived, derivedScale: 2 }, c)).toBeCloseTo(2 * (1 + 0.4 + 1.04), 9);
  });
});
