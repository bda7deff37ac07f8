/**
 * vLLM's async scheduling in the sim's core: each step is planned while the
 * one before it runs, so a request reaching a busy engine joins the step
 * after next; an idle engine takes it at once; running decodes lose nothing.
 */
import { describe, expect, test } from "bun:test";
import { EngineCore } from "../../src/sim/engine-core.ts";
import type { SeqSink } from "../../src/sim/sequence.ts";
import { NO_FRONTEND } from "../../src/sim/step-time.ts";

/** Flat timing: a step with decodes 10 ms, a prefill alone the 1 ms minimum. */
function core(asyncScheduling: boolean): EngineCore {
  return new EngineCore(
    { maxNumSeqs: 8, maxNumBatchedTokens: 512, numGpuBlocks: 1000, blockSize: 16, maxModelLen: 4096, asyncScheduling },
    {
      timing: { derived: undefined, derivedScale: 1, flatDecode: { itlMs: 10, batchSlowdown: 0, maxNumSeqs: 8 }, flatPrefill: { msPerToken: 0 } },
      jitter: 0,
      frontendJitterMs: 0,
      frontend: NO_FRONTEND,
      firstTokenDelayMs: 0,
    },
  );
}

function request(times: number[], clock: { t: number }, outputTokens: number) {
  const sink: SeqSink = { token: () => times.push(clock.t), finish: () => {}, cut: () => {} };
  return {
    prompt: { count: 32, ids: new Int32Array(0), blockHashes: [], state: 1, continued: 0 },
    outputTokens,
    finishReason: "length" as const,
    stallAfter: -1,
    cutAfter: -1,
    intervalMs: 0,
    sink,
  };
}

/** A long request from t=0, a second one arriving at `at`; returns both token times. */
function scenario(asyncScheduling: boolean, at: number): { first: number[]; second: number[] } {
  const c = core(asyncScheduling);
  const clock = { t: 0 };
  const first: number[] = [];
  const second: number[] = [];
  c.submit(request(first, clock, 10), 0);
  let sent = false;
  for (let i = 0; i < 1000; i++) {
    const next = Math.min(c.nextEventAt(), sent ? Infinity : at);
    if (next === Infinity) break;
    clock.t = next;
    c.advance(next);
    if (!sent && next >= at) {
      c.submit(request(second, clock, 3), at);
      sent = true;
    }
  }
  return { first, second };
}

describe("async scheduling", () => {
  test("a request reaching a busy engine mid-step gets its first token one step later than without", () => {
    const sync = scenario(false, 15);
    const asyn = scenario(true, 15);
    // The first request's prefill takes 1 ms, then its decodes 10 ms each: steps end at 1, 11, 21, 31 …
    // Without: planned at the end of the step it arrived in (21), first token at 31.
    expect(sync.second[0]).toBe(31);
    // With: the step from 21 was planned at 11, before it came; it joins the one from 31.
    expect(asyn.second).toEqual([41, 51, 61]);
  });

  test("running decodes keep one token a step: async scheduling changes no token gap", () => {
    const sync = scenario(false, 15);
    const asyn = scenario(true, 15);
    expect(asyn.first).toEqual(sync.first);
    expect(asyn.first.slice(1).map((t, i) => t - asyn.first[i]!)).toEqual(Array(9).fill(10));
  });

  test("an idle engine takes a request at once: nothing was planned ahead", () => {
    const c = core(true);
    const clock = { t: 5 };
    const times: number[] = [];
    c.submit(request(times, clock, 2), 5);
    for (let i = 0; i < 100; i++) {
      const t = c.nextEventAt();
      if (t === Infinity) break;
      clock.t = t;
      c.advance(t);
    }
    expect(times).toEqual([6, 16]);
  });

  test("a request arriving after the last step ended, before the next was planned, is not held back", () => {
    // The first request's last token is at 91: a request at 100 finds the engine idle.
    const asyn = scenario(true, 100);
    expect(asyn.second[0]).toBe(101);
  });
});
