/**
 * The control plane's autoscaler on literal signal sequences: the capacity
 * law sizes for forecast demand over what a replica's KV cache holds, the
 * latency law follows llm-d's formula, and stabilization keeps the count
 * within its bounds, its windows, its surge, its pacing and the GPUs there
 * are — each decision naming why.
 */
import { describe, expect, test } from "bun:test";
import { Autoscaler } from "../../src/control/autoscale/autoscaler.ts";
import { type AutoscaleSample, SignalHistory } from "../../src/control/autoscale/signals.ts";
import { testPolicy } from "../helpers/autoscale-policy.ts";

const policy = testPolicy;

/**
 * A steady state: `rps` arrivals a second, each staying `stayS` s (so
 * rps × stayS in flight), spread over `replicas` serving replicas whose KV
 * cache is full at 100 sequences.
 */
function steady(at: number, rps: number, stayS: number, replicas: number, over: Partial<AutoscaleSample> = {}): AutoscaleSample {
  const inflight = rps * stayS;
  const running = inflight / replicas;
  return {
    at,
    arrivals: Math.round((rps * 15_000) / 1000),
    inflight,
    ttftMs: [300, 320, 310],
    itlMs: [30, 31, 29],
    replicas: Array.from({ length: replicas }, () => ({ running, waiting: 0, kvUsage: running / 100 })),
    provisioned: replicas,
    ready: replicas,
    ...over,
  };
}

function run(a: Autoscaler, samples: AutoscaleSample[]) {
  return samples.map((s) => a.decide(s));
}

describe("the capacity law", () => {
  test("asks for forecast concurrency over what each replica's KV cache holds (Little's law, 90 % of a full cache)", () => {
    const a = new Autoscaler(policy());
    // 4 rps × 40 s = 160 in flight; a full cache holds 100 sequences, a replica is planned to 90.
    const ds = run(
      a,
      Array.from({ length: 8 }, (_, i) => steady(15_000 * (i + 1), 4, 40, 4)),
    );
    const last = ds.at(-1)!;
    expect(last.asked).toBe(2); // ⌈160 / 90⌉
    expect(last.figures.sequences_per_replica).toBeCloseTo(90, 5);
    // Four provisioned, two asked: it holds for the scale-down window first.
    expect(last.desired).toBe(4);
    expect(last.reason).toBe("down-window");
  });

  test("a rising rate is met before the queue builds: the step is asked for in the interval it arrives", () => {
    const a = new Autoscaler(policy());
    const ds = run(a, [...Array.from({ length: 8 }, (_, i) => steady(15_000 * (i + 1), 4, 40, 2)), steady(15_000 * 9, 8, 40, 2, { inflight: 4 * 40 })]);
    const last = ds.at(-1)!;
    // The last interval's 8 rps × 40 s = 320 in flight: 4 replicas of 90, and more for the trend the step starts.
    expect(last.asked).toBeGreaterThanOrEqual(4);
    expect(last.desired).toBe(last.asked);
    expect(last.reason).toBe("forecast");
  });

  test("without a capacity learned yet it holds, unless the SLO is breached: then one more", () => {
    const a = new Autoscaler(policy());
    const none = { replicas: [], provisioned: 2, ready: 2 };
    expect(a.decide(steady(15_000, 1, 10, 2, none)).reason).toBe("no-data");
    const d = a.decide(steady(30_000, 1, 10, 2, { ...none, ttftMs: [9_000, 8_000] }));
    expect(d.reason).toBe("slo-breach");
    expect(d.desired).toBe(3);
  });

  test("inter-token time growing with concurrency bounds a replica below its KV cache", () => {
    const a = new Autoscaler(policy());
    // τ(c) = 10 + 1·c ms: the SLO's 80 % (80 ms) is reached at c = 70, before the cache (90 planned).
    // Each concurrency is held for a minute; requests finish (and report their ITL) once it has run 45 s.
    const samples: AutoscaleSample[] = [];
    for (const [level, c] of [20, 40, 60, 80].entries()) {
      for (let k = 0; k < 4; k++) {
        const i = level * 4 + k + 1;
        samples.push({ ...steady(15_000 * i, c / 10, 10, 1), itlMs: k === 3 ? [10 + c] : [], replicas: [{ running: c, waiting: 0, kvUsage: c / 200 }] });
      }
    }
    const last = run(a, samples).at(-1)!;
    expect(last.figures.tpot_a_ms).toBeCloseTo(10, 5);
    expect(last.figures.tpot_b_ms).toBeCloseTo(1, 5);
    expect(last.figures.sequences_per_replica).toBeCloseTo(70, 0);
  });
  test("once load is gone it walks down to the minimum; what it learned of a replica under load stands through light load", () => {
    const a = new Autoscaler(policy({ minReplicas: 1 }));
    let provisioned = 8;
    const desired: number[] = [];
    // Eight replicas' worth (KV half full: capacity learned), then a light load for 10 minutes, then nothing.
    for (let i = 1; i <= 100; i++) {
      const rps = i <= 10 ? 16 : i <= 50 ? 1 : 0;
      const s =
        rps === 0
          ? {
              ...steady(15_000 * i, 0, 40, provisioned),
              inflight: 0,
              replicas: Array.from({ length: provisioned }, () => ({ running: 0, waiting: 0, kvUsage: 0 })),
            }
          : steady(15_000 * i, rps, 40, provisioned);
      const d = a.decide(s);
      desired.push(d.desired);
      provisioned = d.desired;
    }
    // Light load: 1 rps × 40 s = 40 in flight, one replica's worth though KV usage says nothing (5 %).
    expect(desired[49]).toBeLessThan(8);
    expect(a.decisions().find((d) => d.at === 15_000 * 50)!.reason).not.toBe("no-data");
    expect(desired.at(-1)).toBe(1);
    expect(a.decisions().some((d) => d.reason === "idle" || (d.reason === "min-replicas" && d.figures.arrival_rps === 0))).toBe(true);
  });
});

describe("stabilization", () => {
  test("bounds: never below the minimum nor above the maximum, and the reason says which held it", () => {
    const a = new Autoscaler(policy({ maxReplicas: 3, maxSurge: 10 }));
    const warm = Array.from({ length: 8 }, (_, i) => steady(15_000 * (i + 1), 2, 40, 2));
    expect(run(a, warm).at(-1)!.reason).toBe("min-replicas");
    const d = a.decide(steady(15_000 * 9, 40, 40, 2, { inflight: 40 * 40 }));
    expect(d.desired).toBe(3);
    expect(d.reason).toBe("max-replicas");
  });

  test("surge: no more than maxSurge replicas starting at once", () => {
    const a = new Autoscaler(policy({ maxSurge: 2 }));
    run(
      a,
      Array.from({ length: 8 }, (_, i) => steady(15_000 * (i + 1), 4, 40, 2)),
    );
    // Demand for 8; 2 provisioned with 1 of them still starting: one more may start.
    const d = a.decide(steady(15_000 * 9, 16, 40, 2, { ready: 1 }));
    expect(d.asked).toBeGreaterThanOrEqual(8);
    expect(d.desired).toBe(3);
    expect(d.reason).toBe("surge");
  });

  test("GPUs: it asks only for what placement can hold, and says so", () => {
    const a = new Autoscaler(policy());
    run(
      a,
      Array.from({ length: 8 }, (_, i) => steady(15_000 * (i + 1), 4, 40, 2)),
    );
    const d = a.decide(steady(15_000 * 9, 16, 40, 2, { placeable: 1 }));
    expect(d.desired).toBe(3);
    expect(d.reason).toBe("no-gpus");
  });

  test("scale-down: only after the window's highest ask allows it, then one replica per period; it never flaps", () => {
    const a = new Autoscaler(policy());
    const desired: number[] = [];
    let provisioned = 6;
    for (let i = 1; i <= 60; i++) {
      // 6 replicas' worth for 2 minutes, then 2 replicas' worth.
      const rps = i <= 8 ? 12 : 4;
      const d = a.decide(steady(15_000 * i, rps, 40, provisioned));
      desired.push(d.desired);
      provisioned = d.desired;
    }
    // The first removal waits for the 180 s window after the last high ask (i = 8), then one each 60 s.
    const firstDown = desired.findIndex((n) => n < 6);
    expect(firstDown + 1).toBeGreaterThanOrEqual(8 + 180 / 15);
    const steps = desired.map((n, i) => (i > 0 ? n - desired[i - 1]! : 0));
    expect(Math.min(...steps)).toBe(-1);
    expect(Math.max(...steps)).toBe(0);
    const downs = steps.map((s, i) => (s < 0 ? i : -1)).filter((i) => i >= 0);
    for (let k = 1; k < downs.length; k++) expect(downs[k]! - downs[k - 1]!).toBeGreaterThanOrEqual(60_000 / 15_000);
    expect(desired.at(-1)).toBe(2);
  });
});

describe("the latency law (llm-d's formula)", () => {
  const lat = (over: Parameters<typeof testPolicy>[0] = {}) => new Autoscaler(policy({ law: "latency", ...over }));

  test("a signal above 0.55 scales up by its ratio, credited for replicas still starting", () => {
    const a = lat();
    // p90 TTFT 2,400 ms / 3,000 = 0.8 for every sample: s = 0.8.
    const d = a.decide(steady(15_000, 4, 40, 4, { ttftMs: Array(10).fill(2_400), itlMs: [30] }));
    expect(d.figures.signal).toBeCloseTo(0.8, 5);
    expect(d.asked).toBe(4 + Math.ceil(4 * (0.8 / 0.55 - 1)));
    // Half the replicas still starting: s × ½ = 0.4 < 0.55, so no more than those already placed.
    const b = lat();
    expect(b.decide(steady(15_000, 4, 40, 4, { ttftMs: Array(10).fill(2_400), ready: 2 })).asked).toBe(4);
  });

  test("between 0.40 and 0.55 it holds; below 0.40 it asks for fewer", () => {
    expect(lat().decide(steady(15_000, 4, 40, 4, { itlMs: [45], ttftMs: [300] })).reason).toBe("hold");
    const d = lat().decide(steady(15_000, 4, 40, 4, { itlMs: [20], ttftMs: [300] }));
    expect(d.reason).toBe("latency-low");
    expect(d.asked).toBe(4 - Math.floor(4 * (1 - 0.2 / 0.4)));
  });

  test("the signal is clamped at 2 and averaged over 45 s, so one spike does not run to the maximum", () => {
    const a = lat();
    a.decide(steady(15_000, 4, 40, 4, { ttftMs: [300], itlMs: [45] }));
    a.decide(steady(30_000, 4, 40, 4, { ttftMs: [300], itlMs: [45] }));
    const d = a.decide(steady(45_000, 4, 40, 4, { ttftMs: [90_000], itlMs: [45] }));
    // The 60 s percentile window holds the spike: (0.45 + 0.45 + 2) / 3.
    expect(d.figures.signal).toBeCloseTo((0.45 + 0.45 + 2) / 3, 2);
  });
});

describe("the signal window", () => {
  test("rate, trend, time in flight and percentiles over their windows", () => {
    const h = new SignalHistory(600_000);
    for (let i = 1; i <= 10; i++) h.add(steady(15_000 * i, i, 20, 2, { arrivals: i * 15, ttftMs: [i * 100] }));
    expect(h.rate(15_000)).toBeCloseTo(10, 5);
    expect(h.rateSlope(300_000)).toBeCloseTo(1 / 15, 5);
    expect(h.percentile("ttftMs", 50, 60_000)).toBe(800);
    expect(h.timeInFlight(15_000)).toBeCloseTo(20, 5);
    expect(h.sequencesPerFullCache(15_000)).toBeCloseTo(100, 5);
  });
});
