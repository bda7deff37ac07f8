/**
 * `bench calibrate --served` in small: a two-point sweep on a served
 * sim-engine process, driven by the closed-loop client of its own process,
 * gives the answers the core's closed loop gives (the same lengths, every
 * request answered) and throughput near the core's; the engine's clock was
 * read around it.
 */
import { expect, test } from "bun:test";
import { runServedSweep } from "../../src/bench/calibrate-served.ts";
import { calibrateSweep } from "../../src/sim/calibration.ts";
import { answerLengths } from "../../src/sim/closed-loop.ts";
import type { PublishedSweep } from "../../src/sim/profiles/published-sweeps.ts";

const sweep: PublishedSweep = {
  id: "small",
  title: "a small sweep",
  source: "this test",
  profile: { profile: "l4-qwen2.5-0.5b" },
  inputTokens: 64,
  outputTokens: 24,
  outputSpread: 0.5,
  requests: (c) => 6 * c,
  fitted: false,
  asyncScheduling: true,
  points: [
    { concurrency: 1, outTokS: 100 },
    { concurrency: 4, outTokS: 400 },
  ],
};

test("a two-point sweep served: every answer of the core's lengths, throughput within 30 % of the core's, the engine's clock read", async () => {
  const core = calibrateSweep(sweep);
  const served = await runServedSweep(sweep, core.pointMs, () => {});
  expect(served.points.map((p) => p.concurrency)).toEqual([1, 4]);
  for (const p of served.points) {
    expect(p.errors).toBe(0);
    const coreTokS = core.rows.find((r) => r.concurrency === p.concurrency && r.metric === "out_tok_s")!.sim;
    // Every answer arrived whole (the client counts a short one as failed), so the tokens are the core's.
    expect(p.figures.out_tok_s).toBeGreaterThan(0);
    // On a busy host the served engine's clock stretches: a wide margin, the table reports the exact figure.
    expect(Math.abs(p.figures.out_tok_s - coreTokS) / coreTokS).toBeLessThan(0.3);
    expect(p.figures.ttft_p50_ms).toBeGreaterThan(0);
    expect(p.figures.itl_p50_ms).toBeGreaterThan(0);
  }
  // The lengths asked for (the core's, answerLengths) do vary: the check of whole answers above saw several.
  expect(new Set(answerLengths({ requests: 24, outputTokens: 24, outputSpread: 0.5 })).size).toBeGreaterThan(3);
  expect(served.engine_clock.engines).toBe(1);
  expect(served.engine_clock.timers).toBeGreaterThan(0);
}, 120_000);
