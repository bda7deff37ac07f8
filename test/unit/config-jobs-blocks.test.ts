/** Config blocks of issue 12 (data_dir, batch, idempotency, response_cache, gpu_health): defaults, derived sources, key-path errors. */
import { describe, expect, test } from "bun:test";
import * as D from "../../src/config/defaults.ts";
import { buildConfig } from "../../src/config/load.ts";
import { issuesOf } from "../helpers/config-issues.ts";

describe("issue 12 config blocks", () => {
  test("defaults; without a gpu_health block nothing is shed (gpuHealth is null)", () => {
    const c = buildConfig({});
    expect(c.dataDir).toBe(D.DEFAULT_DATA_DIR);
    expect(c.batch).toEqual({
      maxFileBytes: D.DEFAULT_BATCH_MAX_FILE_BYTES,
      maxLines: D.DEFAULT_BATCH_MAX_LINES,
      concurrencyPerBatch: D.DEFAULT_BATCH_CONCURRENCY_PER_BATCH,
      concurrencyPerTenant: D.DEFAULT_BATCH_CONCURRENCY_PER_TENANT,
      maxAttempts: D.DEFAULT_BATCH_MAX_ATTEMPTS,
      retryBackoffMs: D.DEFAULT_BATCH_RETRY_BACKOFF_MS,
      leaseMs: D.DEFAULT_BATCH_LEASE_MS,
      maxLineBytes: D.DEFAULT_BATCH_MAX_LINE_BYTES,
      maxLineDepth: D.DEFAULT_BATCH_MAX_LINE_DEPTH,
      uploadMemoryBytes: D.DEFAULT_BATCH_UPLOAD_MEMORY_BYTES,
      uploadMinBytesPerS: D.DEFAULT_BATCH_UPLOAD_MIN_BYTES_PER_S,
      tenantMaxBytes: D.DEFAULT_BATCH_TENANT_MAX_BYTES,
      tenantMaxFiles: D.DEFAULT_BATCH_TENANT_MAX_FILES,
    });
    expect(c.idempotency).toEqual({
      ttlMs: D.DEFAULT_IDEMPOTENCY_TTL_S * 1000,
      waitMs: D.DEFAULT_IDEMPOTENCY_WAIT_MS,
      maxResponseBytes: D.DEFAULT_IDEMPOTENCY_MAX_RESPONSE_BYTES,
    });
    expect(c.responseCache.models).toEqual([]);
    expect(c.gpuHealth).toBeNull();
    expect(Object.isFrozen(c.batch)).toBe(true);
  });

  test("gpu_health without sources watches each endpoint's dcgm_url for its pool", () => {
    const c = buildConfig({
      endpoints: [
        { id: "a", url: "http://10.0.0.1:8000", pool: "big", dcgm_url: "http://10.0.0.1:9400/metrics/" },
        { id: "b", url: "http://10.0.0.1:8001", pool: "big", dcgm_url: "http://10.0.0.1:9400/metrics" },
        { id: "c", url: "http://10.0.0.2:8000", dcgm_url: "http://10.0.0.2:9400/metrics", gpu_ids: ["1"] },
        { id: "d", url: "http://10.0.0.3:8000" },
      ],
      gpu_health: { sustained_samples: 3 },
    });
    expect(c.gpuHealth).toMatchObject({
      sources: [
        { url: "http://10.0.0.1:9400/metrics", pool: "big", gpuIds: [] },
        { url: "http://10.0.0.2:9400/metrics", pool: "default", gpuIds: ["1"] },
      ],
      sustainedSamples: 3,
      shedUtilPct: D.DEFAULT_GPU_SHED_UTIL_PCT,
      sourcesFromEndpoints: true,
      shedBatch: true,
      shedBand: 2, // "batch" in the default bands
    });
  });

  test("explicit sources win; an empty source list is a warning, not an error", () => {
    const c = buildConfig({ gpu_health: { sources: [{ url: "http://dcgm:9400/metrics", pool: "p" }], shed_batch: false } });
    expect(c.gpuHealth?.sources).toEqual([{ url: "http://dcgm:9400/metrics", pool: "p", gpuIds: [] }]);
    expect(c.gpuHealth?.shedBatch).toBe(false);
    expect(c.gpuHealth?.sourcesFromEndpoints).toBe(false);
    expect(buildConfig({ gpu_health: {} }).warnings.some((w) => w.startsWith("gpu_health: no sources"))).toBe(true);
  });

  test("bad values name the key path and what was expected", () => {
    const issues = issuesOf(() =>
      buildConfig({
        batch: { concurrency_per_batch: 0, colour: "red" },
        idempotency: { ttl_s: "1d" },
        response_cache: { models: "m" },
        gpu_health: { sustained_samples: 0, shed_util_pct: 101, sources: [{ url: "dcgm:9400" }] },
      }),
    );
    const paths = issues.map((i) => i.slice(0, i.indexOf(":")));
    expect(paths).toEqual(
      expect.arrayContaining([
        "batch.concurrency_per_batch",
        "batch.colour",
        "idempotency.ttl_s",
        "response_cache.models",
        "gpu_health.sustained_samples",
        "gpu_health.shed_util_pct",
        "gpu_health.sources[0].url",
      ]),
    );
    expect(issues.find((i) => i.startsWith("gpu_health.sources[0].url"))).toContain("expected an http(s) URL");
    expect(issuesOf(() => buildConfig({ gpu_health: { shed_band: "bulk" } }))).toEqual([
      "gpu_health.shed_band: unknown band 'bulk' (expected one of interactive, standard, batch)",
    ]);
  });

  test("LLMGW_* overrides reach the new blocks", () => {
    const c = buildConfig({}, { LLMGW_DATA_DIR: "/var/lib/llmgw", LLMGW_BATCH__CONCURRENCY_PER_TENANT: "64" });
    expect(c.dataDir).toBe("/var/lib/llmgw");
    expect(c.batch.concurrencyPerTenant).toBe(64);
  });
});
