/** Sustained GPU saturation and the batch shed decision, on literal samples: full rings, freshness, missing data, healthy GPUs per pool. */
import { describe, expect, test } from "bun:test";
import { buildConfig } from "../../src/config/load.ts";
import type { GpuSample } from "../../src/gpuhealth/dcgm.ts";
import { PoolSaturationTracker, type ScrapedGpu, UtilRing } from "../../src/gpuhealth/gpu-saturation.ts";
import { shedDecision } from "../../src/gpuhealth/shed.ts";
import { GpuSaturationTable } from "../../src/shared/gpu-saturation-table.ts";

const RULES = { sustainedSamples: 3, shedUtilPct: 95, staleAfterMs: 1_000 };

function gpu(uuid: string, util: number | undefined, extra: Partial<GpuSample> = {}, faulted = false): ScrapedGpu {
  return {
    sample: { uuid, gpu: Number(uuid.slice(-1)), utilPct: util, grEngineActive: undefined, migInstance: undefined, ...extra } as GpuSample,
    assessment: { faulted },
  };
}

describe("utilisation ring", () => {
  test("saturated only when full, every sample at or above the threshold, and the latest fresh", () => {
    const r = new UtilRing(3);
    r.push(99, 0);
    r.push(99, 100);
    expect(r.saturated(RULES, 100)).toBe(false); // not full
    r.push(95, 200);
    expect(r.saturated(RULES, 200)).toBe(true);
    expect(r.saturated(RULES, 1_200)).toBe(true);
    expect(r.saturated(RULES, 1_201)).toBe(false); // stale: fail open
    r.push(94.9, 300);
    expect(r.saturated(RULES, 300)).toBe(false);
    r.push(100, 400);
    r.push(100, 500);
    expect(r.saturated(RULES, 500)).toBe(false); // 94.9 still in the ring
    r.push(100, 600);
    expect(r.saturated(RULES, 600)).toBe(true);
    r.push(undefined, 700); // no utilisation reported: not evidence of saturation
    expect(r.saturated(RULES, 700)).toBe(false);
    expect(r.latest).toBeUndefined();
  });
});

describe("pool saturation", () => {
  const src = { url: "http://dcgm-a/metrics", pool: "p", gpuIds: [] as string[] };

  function feed(t: PoolSaturationTracker, scrapes: ScrapedGpu[][], source = src, start = 0) {
    scrapes.forEach((gpus, i) => t.ingest(source, gpus, start + i * 100));
  }

  test("all healthy GPUs saturated → the pool is; one that is not, or is stale, keeps it open", () => {
    const t = new PoolSaturationTracker(RULES);
    feed(t, [
      [gpu("GPU-0", 99), gpu("GPU-1", 99)],
      [gpu("GPU-0", 99), gpu("GPU-1", 50)],
      [gpu("GPU-0", 99), gpu("GPU-1", 99)],
    ]);
    expect(t.saturated("p", 200)).toBe(false);
    feed(
      t,
      [
        [gpu("GPU-0", 99), gpu("GPU-1", 99)],
        [gpu("GPU-0", 99), gpu("GPU-1", 99)],
      ],
      src,
      300,
    );
    expect(t.saturated("p", 400)).toBe(true);
    expect(t.saturated("other-pool", 400)).toBe(false); // no GPUs seen: never shed
    // The exporter stops answering: nothing new comes in and the data goes stale.
    expect(t.saturated("p", 1_401)).toBe(false);
  });

  test("a faulted GPU is out of rotation and does not hold the pool open; a pool of faulted GPUs is not saturated", () => {
    const t = new PoolSaturationTracker(RULES);
    feed(
      t,
      [0, 1, 2].map(() => [gpu("GPU-0", 99), gpu("GPU-1", 0, {}, true)]),
    );
    expect(t.saturated("p", 200)).toBe(true);
    const dead = new PoolSaturationTracker(RULES);
    feed(
      dead,
      [0, 1, 2].map(() => [gpu("GPU-0", 99, {}, true)]),
    );
    expect(dead.saturated("p", 200)).toBe(false);
  });

  test("a repeated scrape (the poller keeps its last good one) adds no sample; gpu_ids pick GPUs by UUID or index", () => {
    const t = new PoolSaturationTracker(RULES);
    for (let i = 0; i < 5; i++) t.ingest(src, [gpu("GPU-0", 99)], 0);
    expect(t.saturated("p", 0)).toBe(false);
    const picky = new PoolSaturationTracker(RULES);
    const only1 = { ...src, gpuIds: ["1"] };
    feed(
      picky,
      [0, 1, 2].map(() => [gpu("GPU-0", 10), gpu("GPU-1", 99)]),
      only1,
    );
    expect(picky.saturated("p", 200)).toBe(true);
    expect(picky.view(200).map((g) => [g.key, g.saturated, g.latestUtilPct])).toEqual([["http://dcgm-a/metrics#GPU-1", true, 99]]);
  });

  test("saturatedUntil: when the oldest latest sample of the pool's healthy GPUs turns stale; 0 when not saturated", () => {
    const t = new PoolSaturationTracker(RULES);
    expect(t.saturatedUntil("p", 0)).toBe(0);
    feed(
      t,
      [0, 1, 2].map(() => [gpu("GPU-0", 99)]),
    );
    const other = { ...src, url: "http://dcgm-b/metrics" };
    feed(
      t,
      [0, 1, 2].map(() => [gpu("GPU-7", 99)]),
      other,
      50,
    );
    // GPU-0's latest sample (200) is older than GPU-7's (250): it bounds the pool.
    expect(t.saturatedUntil("p", 250)).toBe(200 + RULES.staleAfterMs);
    expect(t.saturatedUntil("q", 250)).toBe(0);

    const table = new GpuSaturationTable(4);
    table.publish(2, t.saturatedUntil("p", 250));
    expect(table.saturated(2, 1_199)).toBe(true);
    expect(table.saturated(2, 1_200)).toBe(false); // the writer stopped writing: the flag lapses by itself
    expect(table.saturated(0, 0)).toBe(false);
    expect(table.saturated(9, 0)).toBe(false); // no such row
    const reader = new GpuSaturationTable(4, table.buffer);
    table.publish(1, 5_000);
    expect(reader.saturated(1, 4_999)).toBe(true);
    table.publish(1, 0);
    expect(reader.saturated(1, 1)).toBe(false);
  });

  test("DCGM_FI_PROF_GR_ENGINE_ACTIVE stands in when GPU_UTIL is absent", () => {
    const t = new PoolSaturationTracker(RULES);
    feed(
      t,
      [0, 1, 2].map(() => [gpu("GPU-0", undefined, { grEngineActive: 0.97 })]),
    );
    expect(t.saturated("p", 200)).toBe(true);
  });
});

describe("shed decision", () => {
  const cfg = buildConfig({ gpu_health: { poll_interval_ms: 1_000, sustained_samples: 5 } }).gpuHealth;

  test("only the shed band, only while saturated, with Retry-After of the sustained window; nothing without gpu_health", () => {
    const batch = 2;
    const err = shedDecision(cfg, batch, "p", true);
    expect(err?.code).toBe("GPU_SATURATED");
    expect(err?.status).toBe(429);
    expect(err?.retryAfterS).toBe(5);
    expect(shedDecision(cfg, 0, "p", true)).toBeUndefined(); // interactive is never shed
    expect(shedDecision(cfg, 1, "p", true)).toBeUndefined();
    expect(shedDecision(cfg, batch, "p", false)).toBeUndefined();
    expect(shedDecision(null, batch, "p", true)).toBeUndefined();
    expect(shedDecision({ ...cfg!, shedBatch: false }, batch, "p", true)).toBeUndefined();
  });
});
