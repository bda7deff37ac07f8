import { describe, expect, test } from "bun:test";
import { buildSchedule, promptSegments, type SharedPrefixWorkload, seededRandom } from "../../src/bench/routing/shared-prefix-workload.ts";

const W: SharedPrefixWorkload = {
  groups: 5,
  perGroup: 3,
  systemLen: 40,
  questionLen: 8,
  outputLen: 6,
  warmup: { rate: 50, durationS: 1 },
  stages: [
    { rate: 100, durationS: 4 },
    { rate: 300, durationS: 2 },
  ],
  seed: 7,
};

describe("shared_prefix schedule", () => {
  test("the same seed gives the same schedule; another seed another", () => {
    expect(buildSchedule(W)).toEqual(buildSchedule(W));
    expect(buildSchedule({ ...W, seed: 8 }).requests.map((r) => r.atMs)).not.toEqual(buildSchedule(W).requests.map((r) => r.atMs));
  });

  test("a prompt is its group's system prompt, then its own question", () => {
    expect(promptSegments(W, 2, 1)).toEqual([
      { key: "system-2", tokens: 40 },
      { key: "question-2-1", tokens: 8 },
    ]);
    for (const r of buildSchedule(W).requests) {
      expect(r.segments[0]!.key).toBe(`system-${r.group}`);
      expect(r.segments[1]!.key.startsWith(`question-${r.group}-`)).toBe(true);
      expect(r.maxTokens).toBe(6);
    }
  });

  test("the prompts are sent in one shuffled order, over and over: every cycle of groups × perGroup requests holds each prompt once", () => {
    const { requests } = buildSchedule(W);
    const key = (i: number) => requests[i]!.segments[1]!.key;
    const cycle = W.groups * W.perGroup;
    expect(requests.length).toBeGreaterThan(3 * cycle);
    const first = Array.from({ length: cycle }, (_, i) => key(i));
    expect(new Set(first).size).toBe(cycle);
    for (let i = cycle; i < requests.length; i++) expect(key(i)).toBe(key(i % cycle));
    // Shuffled, not in group order.
    expect(first).not.toEqual([...first].sort());
  });

  test("Poisson arrivals stage by stage: each within its stage, about rate × length of them, the warm-up first as stage -1", () => {
    const { requests, stageStartMs, endMs } = buildSchedule({
      ...W,
      stages: [
        { rate: 2000, durationS: 2 },
        { rate: 500, durationS: 4 },
      ],
    });
    expect(stageStartMs).toEqual([1000, 3000]);
    expect(endMs).toBe(7000);
    const of = (stage: number) => requests.filter((r) => r.stage === stage);
    for (const [stage, from, to, expected] of [
      [-1, 0, 1000, 50],
      [0, 1000, 3000, 4000],
      [1, 3000, 7000, 2000],
    ] as const) {
      const rs = of(stage);
      for (const r of rs) {
        expect(r.atMs).toBeGreaterThanOrEqual(from);
        expect(r.atMs).toBeLessThan(to);
      }
      // A Poisson count: within 5 standard deviations of its mean.
      expect(Math.abs(rs.length - expected)).toBeLessThan(5 * Math.sqrt(expected));
    }
    for (let i = 1; i < requests.length; i++) expect(requests[i]!.atMs).toBeGreaterThanOrEqual(requests[i - 1]!.atMs);
    // Exponential gaps: their spread is their mean (coefficient of variation 1), not a fixed pace.
    const gaps = of(0)
      .slice(1)
      .map((r, i) => r.atMs - of(0)[i]!.atMs);
    const mean = gaps.reduce((s, g) => s + g, 0) / gaps.length;
    const sd = Math.sqrt(gaps.reduce((s, g) => s + (g - mean) ** 2, 0) / gaps.length);
    expect(mean).toBeGreaterThan(0.4);
    expect(mean).toBeLessThan(0.6);
    expect(sd / mean).toBeGreaterThan(0.85);
    expect(sd / mean).toBeLessThan(1.15);
  });

  test("no warm-up: the first stage starts at 0", () => {
    const { warmup: _, ...rest } = W;
    const s = buildSchedule(rest);
    expect(s.stageStartMs[0]).toBe(0);
    expect(s.requests.every((r) => r.stage >= 0)).toBe(true);
  });

  test("the seeded generator stays in [0, 1) and a zero seed still moves", () => {
    const r = seededRandom(0);
    const xs = Array.from({ length: 1000 }, r);
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...xs)).toBeLessThan(1);
    expect(new Set(xs).size).toBe(1000);
  });
});
