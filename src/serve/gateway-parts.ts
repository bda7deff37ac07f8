/**
 * The stages startGateway assembles a gateway from, each a function of what
 * the earlier ones made: the shared-memory tables, the endpoint registry
 * with its circuit breakers, the two workers over the tables, and the batch
 * services (jobs, response cache, their metrics). Order matters only where
 * startGateway says so; nothing here starts a listener.
 */
import { EndpointChooser } from "../admission/chooser.ts";
import { EndpointDirectory } from "../admission/endpoint-directory.ts";
import { ResponseCache } from "../cache/response-cache-store.ts";
import type { StateBackend } from "../shared-state/state-backend.ts";
import type { Config } from "../config/types.ts";
import type { SendLine } from "../jobs/batch-runner.ts";
import { JobsMetrics } from "../metrics/jobs-metrics.ts";
import type { GatewayMetrics } from "../metrics/registry.ts";
import type { PolledEndpoint } from "../protocol/health-messages.ts";
import type { EndpointDescriptor } from "../protocol/scheduler-messages.ts";
import { PrefixIndex } from "../scheduling/prefix-index.ts";
import { SchedulingProfile } from "../scheduling/profile.ts";
import { AdmissionStatsTable, EndpointTable, I, PoolTable, Signals } from "../shared/endpoint-table.ts";
import { GpuSaturationTable } from "../shared/gpu-saturation-table.ts";
import { LoraTable } from "../shared/lora-table.ts";
import type { Logger } from "../shared/logger.ts";
import { PoolShareTable } from "../shared/pool-shares.ts";
import { AdmissionClient } from "../gateway/admission-client.ts";
import { batchLineSend } from "./batch-line-send.ts";
import { CircuitBreakers } from "../gateway/circuit-breaker.ts";
import type { GatewayContext } from "../gateway/context.ts";
import { EndpointRegistry, MAX_POOLS } from "../gateway/endpoints.ts";
import { HealthClient, type HealthEvents } from "./health-client.ts";
import { GatewayJobs } from "../jobs/jobs-service.ts";
import type { ModelCatalog } from "../gateway/model-catalog.ts";
import type { AdapterCatalog } from "../gateway/adapter-catalog.ts";
import { DialGuard } from "../gateway/dial-guard.ts";

/** What the main thread, the scheduler worker and the health worker all read and write. */
export interface SharedTables {
  table: EndpointTable;
  pools: PoolTable;
  stats: AdmissionStatsTable;
  signals: Signals;
  /** Per pool, until when its GPUs are saturated (the health worker writes it with a gpu_health block; all 0 without). */
  gpuSaturation: GpuSaturationTable;
  prefixIndex: PrefixIndex;
  /** Each pool's share of the cluster's demand (state.backend: redis; unused otherwise). */
  shares: PoolShareTable;
  /** LoRA adapters per endpoint (the health worker writes, both choosers read). */
  lora: LoraTable;
}

export function sharedTables(config: Config): SharedTables {
  return {
    table: new EndpointTable(config.maxEndpoints),
    pools: new PoolTable(MAX_POOLS, config.admission.bands.length),
    stats: new AdmissionStatsTable(config.admission.bands.length, MAX_POOLS),
    signals: new Signals(),
    gpuSaturation: new GpuSaturationTable(MAX_POOLS),
    prefixIndex: new PrefixIndex(config.scheduling.prefixAffinity.lruEntries),
    shares: new PoolShareTable(MAX_POOLS),
    lora: new LoraTable(config.maxEndpoints),
  };
}

/**
 * The registry of the configured endpoints, and its circuit breakers. Each
 * transition is logged, and counted once `metrics()` has a registry (the
 * breakers exist before the metrics do: the metrics read the registry).
 */
export function openRegistry(
  config: Config,
  t: SharedTables,
  catalog: ModelCatalog,
  log: Logger,
  metrics: () => GatewayMetrics | undefined,
): { registry: EndpointRegistry; breakers: CircuitBreakers } {
  const breakers = new CircuitBreakers(t.table, config.circuitBreaker, (index, field, state) => {
    const id = registry.idOf(index) ?? String(index);
    if (field === I.CIRCUIT) {
      metrics()?.circuitTransitions.inc({ endpoint: id, state });
      log.warn({ endpoint: id, state }, "circuit breaker");
      return;
    }
    const model = registry.descriptor(index)?.models[field - I.MODEL_CIRCUITS] ?? "unknown";
    metrics()?.modelCircuitTransitions.inc({ endpoint: id, model, state });
    log.warn({ endpoint: id, model, state }, "model circuit breaker");
  });
  const registry = new EndpointRegistry(t.table, catalog, new DialGuard(config.maxEndpoints), breakers);
  for (const e of config.endpoints) registry.add(e);
  return { registry, breakers };
}

export interface Workers {
  admission: AdmissionClient;
  health: HealthClient;
}

/**
 * The scheduler and health workers over the shared tables, told about the
 * endpoints the registry holds now; the registry tells them of every later
 * change. Resolves once both have answered their init.
 */
export async function startWorkers(
  config: Config,
  t: SharedTables,
  registry: EndpointRegistry,
  opts: { breakers: CircuitBreakers; clustered: boolean; events: HealthEvents; log: Logger; adapters?: AdapterCatalog },
): Promise<Workers> {
  const slots = registry.active().map((e) => e.index);
  const directory = new EndpointDirectory(slots.map((i) => registry.descriptor(i)).filter((d): d is EndpointDescriptor => d !== undefined));
  const chooser = new EndpointChooser(t.table, directory, new SchedulingProfile(config.scheduling, undefined, t.prefixIndex), config.health.staleAfterMs, t.lora);
  const admission = new AdmissionClient(
    {
      endpoints: t.table.buffer,
      pools: t.pools.buffer,
      stats: t.stats.buffer,
      signals: t.signals.buffer,
      prefixIndex: t.prefixIndex.buffer,
      lora: t.lora.buffer,
      shares: opts.clustered ? t.shares.buffer : undefined,
      maxEndpoints: config.maxEndpoints,
      maxPools: MAX_POOLS,
      directory: directory.all(),
      scheduling: config.scheduling,
      admission: config.admission,
      staleAfterMs: config.health.staleAfterMs,
    },
    t.table,
    t.pools,
    directory,
    chooser,
    config.admission,
    // A grant for a request whose client already left (its claim is already returned): free the probe slot.
    (index, probe) => opts.breakers.abandon(index, probe),
    opts.adapters,
  );
  const health = new HealthClient(
    {
      buffer: t.table.buffer,
      maxEndpoints: config.maxEndpoints,
      signals: t.signals.buffer,
      endpoints: slots.map((i) => registry.polled(i)).filter((e): e is PolledEndpoint => e !== undefined),
      health: config.health,
      gpuHealth: config.gpuHealth,
      gpuSaturation: t.gpuSaturation.buffer,
      lora: t.lora.buffer,
    },
    opts.events,
    opts.log,
  );
  registry.attach({
    setEndpoint: (index, d) => admission.setEndpoint(index, d),
    setModels: (index, models) => admission.setModels(index, models),
    pollEndpoint: (index, e) => health.pollEndpoint(index, e),
  });
  await Promise.all([admission.whenReady(), health.whenReady()]);
  return { admission, health };
}

export interface BatchServices {
  jobs: GatewayJobs;
  cache: ResponseCache;
  jobsMetrics: JobsMetrics;
}

/**
 * Issue 12's services: batch jobs (their lines run through the gateway's own
 * request path, so `ctx()` is read only when the first line is sent, after
 * the context exists), idempotency records, the response cache, and the
 * metrics of all three plus GPU shedding.
 */
export function openBatchServices(
  config: Config,
  deps: { log: Logger; state: StateBackend; catalog: ModelCatalog; registry: EndpointRegistry; admission: AdmissionClient; gpuSaturation: GpuSaturationTable; metrics: GatewayMetrics; ctx: () => GatewayContext },
): BatchServices {
  const { registry } = deps;
  const poolSaturated = (name: string) => {
    const row = registry.pools().find((p) => p.name === name)?.index;
    return row !== undefined && deps.gpuSaturation.saturated(row, Date.now());
  };
  let send: SendLine | undefined;
  const jobs = new GatewayJobs({
    config,
    log: deps.log,
    send: (line, signal, meta) => (send ??= batchLineSend(deps.ctx()))(line, signal, meta),
    saturated: poolSaturated,
    poolOf: (model) => {
      const row = deps.admission.poolOf(deps.catalog.resolve(model) ?? model);
      return (row === undefined ? undefined : registry.poolName(row)) ?? "default";
    },
    knownModel: (name) => deps.catalog.resolve(name) !== undefined,
    shared: deps.state.shared,
  });
  const cache = new ResponseCache(config.responseCache, deps.state.shared?.responseCache);
  const jobsMetrics = new JobsMetrics(deps.metrics.registry, {
    pools: () => registry.pools().map((p) => p.name),
    ...(config.gpuHealth === null ? {} : { poolSaturated }),
    batchLineStats: () => jobs.lineStats(),
    ...(cache.off ? {} : { cacheStats: () => cache.stats() }),
    idempotentReplays: () => jobs.replays(),
  });
  return { jobs, cache, jobsMetrics };
}
