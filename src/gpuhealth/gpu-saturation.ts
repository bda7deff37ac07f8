/**
 * Sustained GPU saturation, pure. Per GPU a ring of the last N utilisation
 * samples: saturated when the latest sample is fresh, the ring is full and
 * every entry is at or above the threshold. A pool is saturated when it has
 * healthy GPUs and all of them are. Stale or missing data fails open: a GPU
 * we cannot see is never a reason to shed.
 */
import type { GpuSample } from "./dcgm.ts";

interface SaturationRules {
  /** Ring length: samples that must all reach the threshold. */
  sustainedSamples: number;
  /** Utilisation percent (0–100) at or above which a sample counts. */
  shedUtilPct: number;
  /** A latest sample older than this makes the GPU not saturated. */
  staleAfterMs: number;
}

/** A sample's utilisation: DCGM_FI_DEV_GPU_UTIL, else DCGM_FI_PROF_GR_ENGINE_ACTIVE (a 0–1 ratio); undefined when the exporter sends neither. */
function utilisationPct(s: GpuSample): number | undefined {
  return s.utilPct ?? (s.grEngineActive === undefined ? undefined : s.grEngineActive * 100);
}

/** The last N samples of one GPU. A missing value is NaN, which no threshold passes. */
export class UtilRing {
  readonly #values: Float64Array;
  #count = 0;
  #next = 0;
  #latestAtMs = Number.NEGATIVE_INFINITY;

  constructor(size: number) {
    this.#values = new Float64Array(size);
  }

  push(utilPct: number | undefined, atMs: number): void {
    this.#values[this.#next] = utilPct ?? NaN;
    this.#next = (this.#next + 1) % this.#values.length;
    this.#count = Math.min(this.#count + 1, this.#values.length);
    this.#latestAtMs = atMs;
  }

  saturated(rules: SaturationRules, nowMs: number): boolean {
    if (nowMs - this.#latestAtMs > rules.staleAfterMs) return false;
    if (this.#count < this.#values.length) return false;
    // NaN >= x is false: a sample without utilisation breaks the run.
    return this.#values.every((v) => v >= rules.shedUtilPct);
  }

  get latest(): number | undefined {
    if (this.#count === 0) return undefined;
    const v = this.#values[(this.#next - 1 + this.#values.length) % this.#values.length]!;
    return Number.isNaN(v) ? undefined : v;
  }

  get latestAtMs(): number {
    return this.#latestAtMs;
  }
}

/** A dcgm-exporter as the tracker sees it: the pool its GPUs serve and which of them (UUIDs or indices; [] = all). */
export interface SaturationSource {
  url: string;
  pool: string;
  gpuIds: readonly string[];
}

/** One GPU of a scrape with its fault verdict (DcgmPoller's AssessedGpu fits). */
export interface ScrapedGpu {
  sample: GpuSample;
  assessment: { faulted: boolean };
}

interface TrackedGpu {
  pool: string;
  /** The source that last reported it (its key). */
  source: string;
  ring: UtilRing;
  healthy: boolean;
}

function sourceKeyOf(source: SaturationSource): string {
  return `${source.pool}\u0000${source.url}\u0000${source.gpuIds.join(",")}`;
}

export interface GpuSaturationView {
  key: string;
  pool: string;
  healthy: boolean;
  saturated: boolean;
  latestUtilPct: number | undefined;
  ageMs: number;
}

/** Feeds scrapes into per-GPU rings and answers, per pool, whether batch traffic should be shed. */
export class PoolSaturationTracker {
  readonly #rules: SaturationRules;
  readonly #gpus = new Map<string, TrackedGpu>();
  /** Per source, the time of the last scrape taken in: a poller repeating its last good scrape adds no sample. */
  readonly #lastScrapeAt = new Map<string, number>();

  constructor(rules: SaturationRules) {
    this.#rules = rules;
  }

  /** Take in one scrape of `source`, sampled at `sampledAtMs` (undefined: no good scrape yet, nothing to add). */
  ingest(source: SaturationSource, gpus: readonly ScrapedGpu[], sampledAtMs: number | undefined): void {
    const sourceKey = sourceKeyOf(source);
    if (sampledAtMs === undefined || sampledAtMs <= (this.#lastScrapeAt.get(sourceKey) ?? Number.NEGATIVE_INFINITY)) return;
    this.#lastScrapeAt.set(sourceKey, sampledAtMs);
    const wanted = new Set(source.gpuIds);
    const seen = new Set<string>();
    for (const g of gpus) {
      const s = g.sample;
      if (wanted.size > 0 && !wanted.has(s.uuid) && !(s.gpu !== undefined && wanted.has(String(s.gpu)))) continue;
      const key = `${source.url}#${s.uuid}${s.migInstance === undefined ? "" : `/${s.migInstance}`}`;
      seen.add(key);
      let t = this.#gpus.get(key);
      if (!t) this.#gpus.set(key, (t = { pool: source.pool, source: sourceKey, ring: new UtilRing(this.#rules.sustainedSamples), healthy: true }));
      t.pool = source.pool;
      t.source = sourceKey;
      t.healthy = !g.assessment.faulted;
      t.ring.push(utilisationPct(s), sampledAtMs);
    }
    // A GPU its exporter no longer reports (reset, MIG reconfigured) is forgotten: its stale ring would hold the pool open for ever.
    for (const [key, t] of this.#gpus) if (t.source === sourceKey && !seen.has(key)) this.#gpus.delete(key);
  }

  /** A source nobody watches any more (its endpoints left): forget its GPUs, for the same reason. */
  forget(source: SaturationSource): void {
    const sourceKey = sourceKeyOf(source);
    this.#lastScrapeAt.delete(sourceKey);
    for (const [key, t] of this.#gpus) if (t.source === sourceKey) this.#gpus.delete(key);
  }

  /** Saturated: at least one healthy GPU, and every healthy GPU of the pool saturated. A faulted GPU is out of rotation and does not count. */
  saturated(pool: string, nowMs: number): boolean {
    let healthy = 0;
    for (const g of this.#gpus.values()) {
      if (g.pool !== pool || !g.healthy) continue;
      healthy++;
      if (!g.ring.saturated(this.#rules, nowMs)) return false;
    }
    return healthy > 0;
  }

  /**
   * Until when the pool counts as saturated on what is known now: the moment
   * its oldest latest sample turns stale (no newer sample can extend it
   * without being taken in); 0 when it is not saturated. Readers compare it
   * with their clock, so a writer that stops writing fails open by itself.
   */
  saturatedUntil(pool: string, nowMs: number): number {
    if (!this.saturated(pool, nowMs)) return 0;
    let until = Number.POSITIVE_INFINITY;
    for (const g of this.#gpus.values()) {
      if (g.pool === pool && g.healthy) until = Math.min(until, g.ring.latestAtMs + this.#rules.staleAfterMs);
    }
    return until;
  }

  /** Every tracked GPU, for the admin API and gauges. */
  view(nowMs: number): GpuSaturationView[] {
    return [...this.#gpus].map(([key, g]) => ({
      key,
      pool: g.pool,
      healthy: g.healthy,
      saturated: g.healthy && g.ring.saturated(this.#rules, nowMs),
      latestUtilPct: g.ring.latest,
      ageMs: nowMs - g.ring.latestAtMs,
    }));
  }
}
