/**
 * The capacity law's prefill bound on literal signal sequences: a replica
 * prefills only so many prompt tokens a second, so long prompts ask for
 * more replicas than the KV cache alone would — from a throughput given in
 * the policy (an engine profile's) or one learned from the rate replicas
 * served within the TTFT guard — and a sampler that does not count prompt
 * tokens leaves the law as it was.
 */
import { describe, expect, test } from "bun:test";
import { Autoscaler } from "../../src/control/autoscale/autoscaler.ts";
import { PREFILL_HEADROOM } from "../../src/control/autoscale/laws.ts";
import { type AutoscaleSample, SignalHistory } from "../../src/control/autoscale/signals.ts";
import { prefillTokensPerS, profileRow, resolveProfile } from "../../src/sim/profiles/catalog.ts";
import { testPolicy } from "../helpers/autoscale-policy.ts";

/** One replica at least (the prefill bound is read from one up). */
const policy = (over: Parameters<typeof testPolicy>[0] = {}) => testPolicy({ minReplicas: 1, ...over });

/** 4 requests/s staying 40 s on `replicas` replicas whose KV cache holds 100 sequences, prompts of `promptLen` tokens (undefined: not counted). */
function sample(i: number, replicas: number, promptLen: number | undefined, ttftMs = 300): AutoscaleSample {
  const running = 160 / replicas;
  return {
    at: 15_000 * (i + 1),
    arrivals: 60,
    ...(promptLen === undefined ? {} : { promptTokens: 60 * promptLen }),
    inflight: 160,
    ttftMs: [ttftMs, ttftMs, ttftMs],
    itlMs: [30, 31, 29],
    replicas: Array.from({ length: replicas }, () => ({ running, waiting: 0, kvUsage: running / 100 })),
    provisioned: replicas,
    ready: replicas,
  };
}

describe("the capacity law's prefill bound", () => {
  test("without prompt tokens sampled the KV cache alone sizes the fleet", () => {
    const a = new Autoscaler(policy({ promptTokensPerReplicaS: 10_000 }));
    const last = Array.from({ length: 8 }, (_, i) => a.decide(sample(i, 2, undefined))).at(-1)!;
    expect(last.asked).toBe(2); // ⌈160 in flight / 90 a replica⌉
    expect(last.reason).toBe("hold");
    expect(last.figures.prefill_replicas).toBe(0);
  });

  test("a high prompt-token rate asks for more replicas than the KV cache would, and the reason says prefill", () => {
    const a = new Autoscaler(policy({ promptTokensPerReplicaS: 10_000 }));
    // 4 requests/s of 4,000-token prompts: 16,000 prompt tokens/s against 10,000 a replica, planned to the headroom.
    const last = Array.from({ length: 8 }, (_, i) => a.decide(sample(i, 2, 4000))).at(-1)!;
    const perReplica = 10_000 * PREFILL_HEADROOM;
    expect(last.figures.prefill_tokens_per_replica_s).toBe(perReplica);
    expect(last.figures.forecast_prompt_tokens_s).toBe(16_000);
    expect(last.asked).toBe(Math.ceil(16_000 / perReplica));
    expect(last.asked).toBeGreaterThan(2);
    expect(last.reason).toBe("prefill");
    expect(last.desired).toBe(last.asked);
  });

  test("short prompts leave the KV cache the binding bound", () => {
    const a = new Autoscaler(policy({ promptTokensPerReplicaS: 10_000 }));
    const last = Array.from({ length: 8 }, (_, i) => a.decide(sample(i, 2, 500))).at(-1)!;
    expect(last.figures.prefill_replicas).toBe(1);
    expect(last.asked).toBe(2);
    expect(last.reason).toBe("hold");
  });

  test("without a given throughput there is no bound until TTFT crosses its guard; then the knee is learned and planned to the headroom", () => {
    const a = new Autoscaler(policy());
    // 2 replicas served 4 requests/s of 4,000 tokens at a TTFT of 300 ms: 8,000 prompt tokens/s each, no knee seen.
    const warm = Array.from({ length: 8 }, (_, i) => a.decide(sample(i, 2, 4000)));
    expect(warm.at(-1)!.figures.prefill_tokens_per_replica_s).toBeNull();
    expect(warm.at(-1)!.figures.prefill_replicas).toBe(0);
    expect(warm.at(-1)!.asked).toBe(2);
    // Prompts twice as long and TTFT past 80 % of its SLO (not yet breached): over the last minute each replica
    // took (3 × 8,000 + 16,000) / 4 = 10,000 tokens/s, the knee; planned to the headroom, never below the 8,000 served.
    const d = a.decide(sample(8, 2, 8000, 2_800));
    const perReplica = Math.max(10_000 * PREFILL_HEADROOM, 8000);
    expect(d.figures.prefill_tokens_per_replica_s).toBe(perReplica);
    // The last minute's prompt-token rate is what it forecasts: (3 × 16,000 + 32,000) / 4 = 20,000 tokens/s.
    expect(d.figures.forecast_prompt_tokens_s).toBe(20_000);
    expect(d.asked).toBe(Math.ceil(20_000 / perReplica));
    expect(d.asked).toBeGreaterThan(2);
    expect(d.reason).toBe("prefill");
  });
});

describe("prompt tokens in the signal window", () => {
  test("rate, and per serving replica; undefined once a sample in the window did not count them", () => {
    const h = new SignalHistory(600_000);
    for (let i = 0; i < 4; i++) h.add(sample(i, 2, 1000));
    expect(h.promptTokenRate(60_000)).toBeCloseTo(4000, 6);
    expect(h.promptTokenRatePerReplica(60_000)).toBeCloseTo(2000, 6);
    h.add(sample(4, 4, undefined));
    expect(h.promptTokenRate(60_000)).toBeUndefined();
    expect(h.promptTokenRatePerReplica(60_000)).toBeUndefined();
    expect(h.rate(60_000)).toBeCloseTo(4, 6);
  });
});

test("a sim profile's prefill throughput is its token budget over the step that fills it", () => {
  const { name, profile } = resolveProfile({ profile: "h100x2-qwen3-32b" });
  const row = profileRow(name, profile, "");
  expect(prefillTokensPerS(profile)).toBeCloseTo((row.maxNumBatchedTokens * 1000) / row.stepBudgetMs, 6);
  // Qwen3-32B on 2 × H100: about 16,000 prompt tokens/s, compute-bound.
  expect(prefillTokensPerS(profile)).toBeGreaterThan(12_000);
  expect(prefillTokensPerS(profile)).toBeLessThan(20_000);
});
