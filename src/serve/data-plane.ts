/** Builds a gateway's data plane from a Config, part by part in dependency order, wiring only the inputs its scheduling profile reads. */

import { registerFleetMetrics } from "../admin/fleet-collectors.ts";
import { QuotaLimiter } from "../admission/tenant-quota.ts";
import { maskUrlPassword } from "../config/print-config.ts";
import type { Config } from "../config/types.ts";
import { DemandSignals } from "../control/autoscale/demand.ts";
import { AdapterCatalog } from "../gateway/adapter-catalog.ts";
import { Authenticator, type Principal } from "../gateway/api-keys.ts";
import type { CircuitBreakers } from "../gateway/circuit-breaker.ts";
import type { GatewayContext } from "../gateway/context.ts";
import { ContinuationPolicy, refusalsFileOf } from "../gateway/continuation-policy.ts";
import type { EndpointRegistry } from "../gateway/endpoints.ts";
import { ModelCatalog } from "../gateway/model-catalog.ts";
import { NO_TOKENIZE_TARGET, PromptTokenizer } from "../gateway/prompt-tokens.ts";
import { RetryBudget } from "../gateway/retry-budget.ts";
import { RouteSupport } from "../gateway/route-support.ts";
import { LiveKeys } from "../keys/live-keys.ts";

import { registerClusterMetrics } from "../metrics/cluster-metrics.ts";
import { DcgmGpuStore } from "../metrics/gpu-collector.ts";
import { registerKeyMetrics } from "../metrics/key-metrics.ts";
import { registerKvEventsMetrics } from "../metrics/kv-events-metrics.ts";
import { OTHER_TENANT } from "../metrics/names.ts";
import { GatewayMetrics } from "../metrics/registry.ts";
import { profileInputs } from "../scheduling/profile-inputs.ts";
import type { Logger } from "../shared/logger.ts";
import { loopLag } from "../shared/loop-lag.ts";
import { ClusterRuntime } from "../shared-state/cluster-runtime.ts";
import { openStateBackend, type StateBackend } from "../shared-state/state-backend.ts";
import type { RequestTracer } from "../tracing/tracer-contract.ts";
import { ColdStarts } from "./cold-starts.ts";
import { ConfigReloader } from "./config-reload.ts";
import { endpointAdaptersReader } from "./endpoint-adapters.ts";
import { type GatewayFleet, openGatewayFleet } from "./fleet-wiring.ts";
import { type BatchServices, openBatchServices, openRegistry, type SharedTables, sharedTables, startWorkers, type Workers } from "./gateway-parts.ts";
import type { HealthClient, HealthEvents } from "./health-client.ts";
import { Late } from "./late.ts";
import { LiveContext } from "./live-context.ts";
import { openKeyStore } from "./open-key-store.ts";
import { tokenizeTarget } from "./tokenize-target.ts";

export interface DataPlane {
  /** What the request path read at start (the API listener serves `live.current`). */
  ctx: GatewayContext;
  /** The request path's context as of now: a configuration reload swaps it. */
  live: LiveContext;
  /** Re-reads the config file and applies it live (absent without `reread`: nothing to re-read). */
  reloader: ConfigReloader | undefined;
  tables: SharedTables;
  registry: EndpointRegistry;
  breakers: CircuitBreakers;
  workers: Workers;
  services: BatchServices;
  /** The control plane, when the config has a fleet (not started: fleet.start()). */
  fleet: GatewayFleet | undefined;
  /** This gateway's part in a cluster (state.backend: redis; not started: cluster.start()). */
  cluster: ClusterRuntime | undefined;
  state: StateBackend;
  /** What the fleet collectors read, for the dashboard. */
  fleetReads: ReturnType<typeof registerFleetMetrics>;
  bandNames: string[];
  /** Every endpoint was polled once and a fleet has settled: what the gateway serves is known. */
  discovered(): boolean;
  /** Closes the services, stops the breakers and the workers and closes the state backend (after the listeners stopped). */
  close(): Promise<void>;
}

/**
 * Builds the data plane without starting a listener, each part from those
 * before it. Three calls run the other way, each through a named Late
 * bound as soon as its part exists: the circuit breakers count into the
 * metrics (which read the registry that holds the breakers), the fleet asks
 * the health worker to poll its agents (the worker hands their snapshots
 * to the fleet), and batch lines and background responses run through the
 * request path (whose context holds their services).
 *
 * What the scheduling profile reads decides what is wired for it, from the
 * plugins' declarations: prompt-prefix hashing on the main thread for
 * `prefix-hashes`; the KV-events worker and the engines' /tokenize for
 * `kv-blocks`.
 */
export async function buildDataPlane(
  config: Config,
  opts: { log: Logger; defaultMetrics?: boolean /** Reads the config file again as at start, for a reload. */; reread?: () => Config },
): Promise<DataPlane> {
  const { log } = opts;
  const reads = profileInputs(config.scheduling);
  if (!reads.has("kv-blocks") && config.endpoints.some((e) => e.kvEvents !== undefined)) {
    log.info("endpoints[].kv_events not followed: no scorer weighted above 0 reads the engines' KV blocks");
  }
  const bandNames = config.admission.bands.map((b) => b.name);
  // Opened before any worker starts: an unusable data_dir, or a Redis that does not answer, stops the start with nothing to clean up.
  const state = await openStateBackend(config);
  const t = sharedTables(config);
  const adapters = new AdapterCatalog();
  const catalog = new ModelCatalog(config, adapters);
  const gpuStore = new DcgmGpuStore(config.health.staleAfterMs);

  const lateMetrics = new Late<GatewayMetrics>("gateway metrics");
  const lateHealth = new Late<HealthClient>("health worker");
  const requestPath = new Late<LiveContext>("request path");

  const { registry, breakers } = openRegistry(config, t, catalog, log, lateMetrics);
  // Several gateways (state.backend: redis): lease, demand exchange and shared quotas; the pool table's rows are the registry's pools.
  const cluster = state.redis
    ? new ClusterRuntime(config, state.redis, {
        shares: t.shares,
        demand: { pools: () => registry.pools(), demand: (pool) => t.pools.held(pool) + t.pools.queued(pool) },
      })
    : undefined;
  // The request path records what the fleet's autoscaler reads of its models (only autoscaled models are collected).
  const demand = new DemandSignals();
  // The fleet and the health worker call each other: the worker polls the fleet's agents and hands their snapshots to the fleet.
  // The fleet comes first (the worker's events name it); pollAgents is first called by fleet.start(), after this returns.
  const fleet = await openGatewayFleet(config, {
    registry,
    pollAgents: (agents, settings) => lateHealth.get().pollAgents(agents, settings),
    log,
    store: state.shared?.fleet,
    leadership: cluster?.leadership(),
    demand,
    ...(cluster ? { peerDemand: cluster.autoscaleDemand } : {}),
    adapters: {
      demand: adapters,
      of: endpointAdaptersReader(adapters, t.lora, t.table, config.health.staleAfterMs),
      declared: (list) => adapters.setDeclared(list),
    },
  });
  // A model the fleet wants replicas of is answered 503 while none is ready, not 404.
  if (fleet) catalog.expectDesired((name) => fleet.manager.state.models.has(name));

  const polled = { engines: false };
  const events = healthEvents({ registry, adapters, gpuStore, fleet, log, enginesPolled: () => (polled.engines = true) });
  const workers = await startWorkers(config, t, registry, {
    breakers,
    clustered: cluster !== undefined,
    followKvEvents: reads.has("kv-blocks"),
    events,
    log,
    adapters,
  });
  lateHealth.bind(workers.health);
  const { admission, kvEvents } = workers;

  const metrics = lateMetrics.bind(
    new GatewayMetrics(t.table, () => registry.active(), {
      defaultMetrics: opts.defaultMetrics ?? true,
      stats: t.stats,
      bandNames,
      pools: () => registry.pools(),
      schedulerMessages: () => admission.posted,
      lora: t.lora,
      staleAfterMs: config.health.staleAfterMs,
    }),
  );
  loopLag.onStall = (seconds, cause) => metrics.loopStalls.observe({ cause }, seconds);
  loopLag.start();
  const fleetReads = registerFleetMetrics({
    registry: metrics.registry,
    gpuStore,
    fleet: fleet?.manager,
    staleAfterMs: config.health.staleAfterMs,
    pools: t.pools,
    bandNames,
    poolList: () => registry.pools(),
  });
  if (cluster) registerClusterMetrics(metrics.registry, () => cluster.status());
  const kvMetrics = registerKvEventsMetrics(metrics.registry, t.kvStats, () => registry.active());

  const discovered = () => polled.engines && (fleet?.manager.isSettled() ?? true);
  const services = openBatchServices(config, {
    log,
    state,
    catalog,
    registry,
    admission,
    gpuSaturation: t.gpuSaturation,
    metrics,
    requestPath,
    discovered: async () => {
      while (!discovered()) await Bun.sleep(50);
    },
  });
  const coldStarts = fleet ? new ColdStarts(fleet.manager, log) : undefined;
  const tenantNames = new Set(config.tenants.map((tenant) => tenant.name));
  // The OpenTelemetry SDK is loaded only when tracing is on: off, the gateway neither loads nor runs any of it.
  let tracer: RequestTracer | undefined;
  if (config.tracing) {
    const { openTracer } = await import("../tracing/otel-tracer.ts");
    tracer = openTracer(config.tracing, metrics.registry);
    log.info(
      { endpoint: maskUrlPassword(config.tracing.endpoint), protocol: config.tracing.protocol, sample_ratio: config.tracing.sampleRatio },
      "tracing on: OTLP export",
    );
  }
  // Live keys: read once before the listeners open (a key created before this start works on its first request), then followed each second.
  const auth = new Authenticator(config.auth, config.admission);
  const liveKeys: LiveKeys<readonly Principal[]> = new LiveKeys({
    store: state.shared?.keys ?? openKeyStore(config.dataDir, log),
    ladder: (tenant, maxBand, grant) => auth.liveLadder(tenant, maxBand, grant),
    metrics: registerKeyMetrics(metrics.registry, () => liveKeys.active),
  });
  auth.attachLiveKeys(liveKeys);
  await liveKeys.start();
  // A reload changes the one authenticator in place (its YAML keys, whether keys are checked): the live keys and the keys API stay attached to it.
  const authFor = (c: Config) => {
    auth.reconfigure(c.auth);
    return auth;
  };
  const localQuota = cluster ? undefined : new QuotaLimiter(config.tenants);
  const ctx: GatewayContext = {
    config,
    catalog,
    table: t.table,
    endpoints: registry,
    admission,
    breakers,
    budget: new RetryBudget(config.retry.budgetRatio, config.retry.minPerS),
    dial: registry.dial,
    metrics,
    log,
    usesPrefixHashes: reads.has("prefix-hashes"),
    promptTokens: new PromptTokenizer(
      config.kvEvents.tokenize,
      // Nothing reads token ids unless the profile reads KV blocks: never ask for them then.
      kvEvents ? tokenizeTarget(kvEvents, workers.directory, t.table, t.kvStats, registry) : NO_TOKENIZE_TARGET,
      kvMetrics,
    ),
    auth,
    liveKeys,
    quota: cluster?.quota ?? (localQuota as QuotaLimiter),
    continuation: new ContinuationPolicy(config.continuation, refusalsFileOf(config, log)),
    routes: new RouteSupport(config.endpoints),
    tenantLabel: (tenant) => (tenantNames.has(tenant) ? tenant : OTHER_TENANT),
    ...services,
    gpuSaturation: t.gpuSaturation,
    cluster,
    ...(fleet ? { adapterLoads: { requested: () => fleet.manager.requestTick(), waitMs: config.fleet.adapterLoadWaitMs }, demand, coldStarts } : {}),
    ...(tracer ? { tracer } : {}),
  };
  const live = requestPath.bind(new LiveContext(ctx));
  const reloader = opts.reread
    ? new ConfigReloader({ read: opts.reread, live, tables: t, quota: localQuota, authFor, registry: metrics.registry, log })
    : undefined;

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      services.jobs.close();
      services.responses.close();
      coldStarts?.close();
      // The last second's usage goes to the store before it closes.
      await liveKeys.stop();
      breakers.stop();
      admission.terminate();
      // The spans of the last requests go out before the gateway exits (bounded by tracing.export_timeout_ms).
      await Promise.all([workers.health.stop(), kvEvents?.stop(), tracer?.shutdown().catch(() => {})]);
      await state.close();
    })());
  return { ctx, live, reloader, tables: t, registry, breakers, workers, services, fleet, cluster, state, fleetReads, bandNames, discovered, close };
}

/** What the health worker's reports do on the main thread: the catalog learns models and adapters, the GPU store and the fleet their figures. */
function healthEvents(deps: {
  registry: EndpointRegistry;
  adapters: AdapterCatalog;
  gpuStore: DcgmGpuStore;
  fleet: GatewayFleet | undefined;
  log: Logger;
  enginesPolled: () => void;
}): HealthEvents {
  const { registry, adapters, log } = deps;
  return {
    models(index, models, listed) {
      if (registry.modelsDiscovered(index, models)) log.info({ endpoint: registry.idOf(index), models }, "endpoint models discovered");
      if (registry.idOf(index) !== undefined && adapters.setEndpoint(index, listed))
        log.info({ endpoint: registry.idOf(index), adapters: listed.map((a) => a.name) }, "endpoint LoRA adapters");
    },
    adapterIds: (names) => adapters.setIds(names),
    readiness(index, ready, healthy, error) {
      // An upstream that cannot be reached (or whose /health fails) is an operator's business: warn.
      if (!healthy) log.warn({ endpoint: registry.idOf(index), url: registry.urlOf(index), ready, healthy, error }, "endpoint unreachable or unhealthy");
      else log.info({ endpoint: registry.idOf(index), ready, healthy, error }, "endpoint readiness");
    },
    enginesPolled: deps.enginesPolled,
    gpus: (report) => deps.gpuStore.update(report),
    agent: (node, snapshot) => deps.fleet?.onAgentSnapshot(node, snapshot),
  };
}
