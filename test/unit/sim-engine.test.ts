import { describe, expect, test } from "bun:test";
import { newGpuFaultState, type SimLiveConfig, type SimStaticConfig } from "../../src/sim/config.ts";
import { Engine, type SeqSink } from "../../src/sim/engine.ts";
import { textPrompt } from "../../src/sim/tokens.ts";

function fixed(over: Partial<SimStaticConfig> = {}): SimStaticConfig {
  return {
    models: ["m"],
    maxNumSeqs: 4,
    numGpuBlocks: 64,
    blockSize: 4,
    maxModelLen: 256,
    outputLen: 8,
    embeddingDim: 8,
    startupMs: 0,
    metricsFlavor: "vllm-v1",
    gpus: 0,
    gpuModel: "x",
    dcgmModelLabel: "DCGM_FI_DEV_NAME",
    ...over,
  };
}
function live(over: Partial<SimLiveConfig> = {}): SimLiveConfig {
  return {
    itlMs: 2,
    prefillOverheadMs: 1,
    prefillMsPerToken: 0,
    jitter: 0,
    batchSlowdown: 0,
    faultRate: 0,
    faultTypes: [],
    dead: false,
    dcgmDead: false,
    gpus: [newGpuFaultState()],
    ...over,
  };
}

class Recorder implements SeqSink {
  tokens: number[] = [];
  finished: string | undefined;
  wasCut = false;
  readonly done: Promise<void>;
  private resolve: () => void = () => {};
  constructor() {
    this.done = new Promise((r) => (this.resolve = r));
  }
  token(i: number) {
    this.tokens.push(i);
  }
  finish(reason: "stop" | "length") {
    this.finished = reason;
    this.resolve();
  }
  cut() {
    this.wasCut = true;
    this.resolve();
  }
}

function req(
  sink: SeqSink,
  text = "hello world, this is a prompt",
  extra: Partial<{ outputTokens: number; stallAfter: number; cutAfter: number; intervalMs: number }> = {},
) {
  return { prompt: textPrompt(text, 4), outputTokens: 5, finishReason: "length" as const, stallAfter: -1, cutAfter: -1, intervalMs: 0, sink, ...extra };
}

describe("sim Engine", () => {
  test("generates every token in order, finishes and frees its blocks", async () => {
    const e = new Engine(fixed(), live());
    const r = new Recorder();
    e.submit(req(r));
    await r.done;
    expect(r.tokens).toEqual([0, 1, 2, 3, 4]);
    expect(r.finished).toBe("length");
    expect(e.runningCount).toBe(0);
    expect(e.kv.used).toBe(0);
    expect(e.stats.generationTokens).toBe(5);
    expect(e.stats.success.length).toBe(1);
    e.stop();
  });

  test("more requests than max-num-seqs wait in FIFO order", async () => {
    const e = new Engine(fixed({ maxNumSeqs: 2 }), live({ itlMs: 5 }));
    const sinks = [new Recorder(), new Recorder(), new Recorder()];
    const order: number[] = [];
    sinks.forEach((s, i) => {
      const orig = s.token.bind(s);
      s.token = (k: number) => {
        if (k === 0) order.push(i);
        orig(k);
      };
      e.submit(req(s));
    });
    expect(e.waitingCount).toBe(3);
    await Bun.sleep(4);
    expect(e.runningCount).toBe(2);
    expect(e.waitingCount).toBe(1);
    await Promise.all(sinks.map((s) => s.done));
    expect(order).toEqual([0, 1, 2]);
    expect(e.waitingCount).toBe(0);
    e.stop();
  });

  test("a request waits while KV blocks are short", async () => {
    // 4 blocks of 4 tokens; a 48-char prompt is 12 tokens = 3 blocks, growing to 4 with its output.
    const e = new Engine(fixed({ numGpuBlocks: 4, maxModelLen: 16 }), live({ itlMs: 3 }));
    const a = new Recorder();
    const b = new Recorder();
    e.submit(req(a, "x".repeat(48), { outputTokens: 4 }));
    e.submit(req(b, "y".repeat(48), { outputTokens: 4 }));
    await Bun.sleep(4);
    expect(e.runningCount).toBe(1);
    expect(e.waitingCount).toBe(1);
    await a.done;
    expect(b.tokens.length).toBe(0);
    await b.done;
    expect(b.tokens).toEqual([0, 1, 2, 3]);
    expect(e.kv.used).toBe(0);
    e.stop();
  });

  test("abort frees the blocks at once and counts a disconnect", async () => {
    const e = new Engine(fixed(), live({ itlMs: 50 }));
    const r = new Recorder();
    const s = e.submit(req(r, "hello", { outputTokens: 100 }));
    await Bun.sleep(10);
    expect(e.runningCount).toBe(1);
    expect(e.kv.used).toBeGreaterThan(0);
    e.abort(s, true);
    expect(e.runningCount).toBe(0);
    expect(e.kv.used).toBe(0);
    expect(e.stats.disconnects).toBe(1);
    expect(e.stats.success.abort).toBe(1);
    e.stop();
  });

  test("a repeated prompt hits the prefix cache and skips prefill for cached tokens", async () => {
    const e = new Engine(fixed(), live({ prefillMsPerToken: 1 }));
    const text = "a shared system prompt that spans several blocks of tokens";
    const r1 = new Recorder();
    e.submit(req(r1, text));
    await r1.done;
    const hits0 = e.stats.prefixHits;
    const r2 = new Recorder();
    e.submit(req(r2, text));
    await r2.done;
    expect(hits0).toBe(0);
    expect(e.stats.prefixHits).toBeGreaterThan(0);
    expect(e.stats.prefixHits).toBeLessThan(textPrompt(text, 4).count);
    e.stop();
  });

  test("stall holds its blocks, cut ends the sequence, slow keeps its own interval", async () => {
    const e = new Engine(fixed(), live({ itlMs: 2 }));
    const stalled = new Recorder();
    const s = e.submit(req(stalled, "p", { outputTokens: 10, stallAfter: 2 }));
    const cut = new Recorder();
    e.submit(req(cut, "q", { outputTokens: 10, cutAfter: 3 }));
    await cut.done;
    await Bun.sleep(20);
    expect(stalled.tokens).toEqual([0, 1]);
    expect(cut.tokens).toEqual([0, 1, 2]);
    expect(cut.wasCut).toBe(true);
    expect(e.runningCount).toBe(1);
    e.abort(s, true);
    expect(e.kv.used).toBe(0);

    const slow = new Recorder();
    const t0 = performance.now();
    e.submit(req(slow, "r", { outputTokens: 3, intervalMs: 30 }));
    await slow.done;
    expect(performance.now() - t0).toBeGreaterThanOrEqual(55); // two 30 ms gaps, vs ~4 ms at the 2 ms step
    e.stop();
  });
});

describe("the served engine's own clock", () => {
  /** One 20-token request at a 10 ms step; `hogMs` > 0 blocks the engine's thread that long at the 5th token (a CPU hog beside it). */
  async function run(hogMs: number) {
    const e = new Engine(fixed(), live({ itlMs: 10 }));
    const r = new Recorder();
    const token = r.token.bind(r);
    r.token = (k: number) => {
      token(k);
      if (k === 4 && hogMs > 0) {
        const until = performance.now() + hogMs;
        while (performance.now() < until) {
          // the host gives the engine's thread no turn
        }
      }
    };
    e.submit(req(r, "hello", { outputTokens: 20 }));
    await r.done;
    e.stop();
    return { tokens: r.tokens.length, clock: e.clock.view(), late: e.clock.late };
  }

  test("a thread held 150 ms mid-run shows as a late timer and a slipped schedule; the same run unheld does not", async () => {
    const held = await run(150);
    const free = await run(0);
    expect(held.tokens).toBe(20);
    expect(free.tokens).toBe(20);
    // The step due during the hold ran ~140 ms late; the steps after it start from then: the schedule slipped.
    expect(held.clock.late_max_ms).toBeGreaterThanOrEqual(120);
    expect(held.clock.slipped_ms).toBeGreaterThanOrEqual(100);
    expect(held.clock.slipped_ms - free.clock.slipped_ms).toBeGreaterThanOrEqual(100);
    expect(held.late.count).toBeGreaterThanOrEqual(20);
    // Every timer callback is in the histogram; the held one lands past 100 ms.
    const cum = held.late.cumulative();
    const at100ms = held.late.bounds.indexOf(0.1);
    expect(cum.at(-1)! - cum[at100ms]!).toBeGreaterThanOrEqual(1);
  });
});
