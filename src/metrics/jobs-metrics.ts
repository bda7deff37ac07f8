/**
 * Metrics of the batch-work parts (shedding, batch lines, response cache,
 * idempotent replay) on the gateway's registry. Counts the parts keep are read
 * at scrape time, so the request path pays nothing; the shed counter is the
 * one the gateway increments at each GPU_SATURATED refusal.
 */
import { Counter, Gauge, type Registry } from "prom-client";
import { BATCH_LINE_OUTCOMES, type BatchLineOutcome, CACHE_RESULTS, M, WAIT_REASONS, type WaitReason } from "./names.ts";

/** Where the numbers come from; any part the gateway does not run is left out and its series are absent. */
interface JobsMetricSources {
  /** The pools at scrape time (fleet pools appear at run time). */
  pools: () => Iterable<string>;
  /** Per pool; omit without a gpu_health block. */
  poolSaturated?: (pool: string) => boolean;
  batchLineStats?: () => Readonly<Record<BatchLineOutcome, number>>;
  batchLineWaits?: () => Readonly<Record<WaitReason, number>>;
  /** Whether the batch store is usable (false once found corrupt). */
  jobsStoreAvailable?: () => boolean;
  /** Bytes uploads hold in memory now. */
  uploadBytesHeld?: () => number;
  cacheStats?: () => { hits: number; misses: number; bytes: number | undefined };
  idempotentReplays?: () => number;
}

export class JobsMetrics {
  /** Increment once per 429 GPU_SATURATED sent, labelled with the request's pool. */
  readonly gpuShed: Counter<"pool">;

  constructor(registry: Registry, src: JobsMetricSources) {
    const registers = [registry];
    const { poolSaturated, batchLineStats, batchLineWaits, jobsStoreAvailable, uploadBytesHeld, cacheStats, idempotentReplays } = src;
    if (jobsStoreAvailable) {
      new Gauge({
        name: M.jobsStoreAvailable.name,
        help: M.jobsStoreAvailable.help,
        registers,
        collect() {
          this.set(jobsStoreAvailable() ? 1 : 0);
        },
      });
    }
    if (uploadBytesHeld) {
      new Gauge({
        name: M.uploadBytesHeld.name,
        help: M.uploadBytesHeld.help,
        registers,
        collect() {
          this.set(uploadBytesHeld());
        },
      });
    }
    this.gpuShed = new Counter({
      name: M.gpuShed.name,
      help: M.gpuShed.help,
      labelNames: M.gpuShed.labels,
      registers,
      // With gpu_health, every pool has a series from the start (0 until a refusal), so rate() sees the first one.
      collect() {
        if (poolSaturated) for (const pool of src.pools()) this.inc({ pool }, 0);
      },
    });
    if (poolSaturated) {
      new Gauge({
        name: M.poolGpuSaturated.name,
        help: M.poolGpuSaturated.help,
        labelNames: M.poolGpuSaturated.labels,
        registers,
        collect() {
          for (const pool of src.pools()) this.set({ pool }, poolSaturated(pool) ? 1 : 0);
        },
      });
    }
    if (batchLineStats) {
      new Counter({
        name: M.batchLines.name,
        help: M.batchLines.help,
        labelNames: M.batchLines.labels,
        registers,
        collect() {
          const stats = batchLineStats();
          this.reset();
          for (const outcome of BATCH_LINE_OUTCOMES) this.inc({ outcome }, stats[outcome]);
        },
      });
    }
    if (batchLineWaits) {
      new Counter({
        name: M.batchLineWaits.name,
        help: M.batchLineWaits.help,
        labelNames: M.batchLineWaits.labels,
        registers,
        collect() {
          const waits = batchLineWaits();
          this.reset();
          for (const reason of WAIT_REASONS) this.inc({ reason }, waits[reason]);
        },
      });
    }
    if (cacheStats) {
      new Counter({
        name: M.cacheLookups.name,
        help: M.cacheLookups.help,
        labelNames: M.cacheLookups.labels,
        registers,
        collect() {
          const s = cacheStats();
          this.reset();
          for (const result of CACHE_RESULTS) this.inc({ result }, result === "hit" ? s.hits : s.misses);
        },
      });
      new Gauge({
        name: M.cacheBytes.name,
        help: M.cacheBytes.help,
        registers,
        collect() {
          const bytes = cacheStats().bytes;
          this.reset();
          if (bytes !== undefined) this.set(bytes);
        },
      });
    }
    if (idempotentReplays) {
      new Counter({
        name: M.idempotentReplays.name,
        help: M.idempotentReplays.help,
        registers,
        collect() {
          this.reset();
          this.inc(idempotentReplays());
        },
      });
    }
  }
}
