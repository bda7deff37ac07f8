/** Resolves the issue-12 config blocks (data_dir, batch, idempotency, response_cache, gpu_health) from the parsed wire form. */
import type { ParsedConfig } from "./schema.ts";
import type { BatchConfig, GpuHealthConfig, GpuHealthSource, IdempotencyConfig, ResponseCacheConfig } from "./types.ts";

interface JobsConfigPart {
  dataDir: string;
  batch: BatchConfig;
  idempotency: IdempotencyConfig;
  responseCache: ResponseCacheConfig;
  gpuHealth: GpuHealthConfig | null;
}

/** Key-path issues across blocks (the band to shed must exist). */
export function jobsCrossFieldIssues(c: ParsedConfig): string[] {
  const issues: string[] = [];
  const g = c.gpu_health;
  if (g !== undefined && !c.admission.bands.some((b) => b.name === g.shed_band)) {
    issues.push(`gpu_health.shed_band: unknown band '${g.shed_band}' (expected one of ${c.admission.bands.map((b) => b.name).join(", ")})`);
  }
  return issues;
}

/** Without explicit sources, every endpoint's dcgm_url is watched for that endpoint's pool (one source per url, pool and GPU set). */
function gpuSources(c: ParsedConfig): GpuHealthSource[] {
  const explicit = c.gpu_health?.sources ?? [];
  if (explicit.length > 0) return explicit.map((s) => ({ url: s.url.replace(/\/+$/, ""), pool: s.pool, gpuIds: s.gpu_ids }));
  const seen = new Map<string, GpuHealthSource>();
  for (const e of c.endpoints) {
    if (e.dcgm_url === undefined) continue;
    const url = e.dcgm_url.replace(/\/+$/, "");
    const key = `${url}\u0000${e.pool}\u0000${[...e.gpu_ids].sort().join(",")}`;
    if (!seen.has(key)) seen.set(key, { url, pool: e.pool, gpuIds: e.gpu_ids });
  }
  return [...seen.values()];
}

export function resolveJobsConfig(c: ParsedConfig, warnings: string[]): JobsConfigPart {
  const g = c.gpu_health;
  let gpuHealth: GpuHealthConfig | null = null;
  if (g !== undefined) {
    const sources = gpuSources(c);
    const fromEndpoints = g.sources.length === 0;
    // Fleet replicas join at run time with their node's dcgm_url (nodes[], or an agent registering with --dcgm-url).
    const fleetMayWatch = c.nodes.some((n) => n.dcgm_url !== undefined) || c.fleet.registration_token !== undefined;
    if (sources.length === 0 && !fleetMayWatch)
      warnings.push("gpu_health: no sources and no endpoint or node has a dcgm_url, so no GPU is watched and nothing is shed");
    gpuHealth = {
      sources,
      sourcesFromEndpoints: fromEndpoints,
      pollIntervalMs: g.poll_interval_ms,
      staleAfterMs: g.stale_after_ms,
      sustainedSamples: g.sustained_samples,
      shedUtilPct: g.shed_util_pct,
      shedBatch: g.shed_batch,
      shedBand: c.admission.bands.findIndex((b) => b.name === g.shed_band),
    };
  }
  return {
    dataDir: c.data_dir,
    batch: {
      maxFileBytes: c.batch.max_file_bytes,
      maxLines: c.batch.max_lines,
      concurrencyPerBatch: c.batch.concurrency_per_batch,
      concurrencyPerTenant: c.batch.concurrency_per_tenant,
      maxAttempts: c.batch.max_attempts,
      retryBackoffMs: c.batch.retry_backoff_ms,
      leaseMs: c.batch.lease_ms,
      maxLineBytes: c.batch.max_line_bytes,
      maxLineDepth: c.batch.max_line_depth,
      uploadMemoryBytes: c.batch.upload_memory_bytes,
      uploadMinBytesPerS: c.batch.upload_min_bytes_per_s,
      tenantMaxBytes: c.batch.tenant_max_bytes,
      tenantMaxFiles: c.batch.tenant_max_files,
    },
    idempotency: {
      ttlMs: c.idempotency.ttl_s * 1000,
      waitMs: c.idempotency.wait_ms,
      maxResponseBytes: c.idempotency.max_response_bytes,
    },
    responseCache: {
      models: c.response_cache.models,
      maxBytes: c.response_cache.max_bytes,
      maxEntryBytes: c.response_cache.max_entry_bytes,
      ttlMs: c.response_cache.ttl_s * 1000,
    },
    gpuHealth,
  };
}
