/**
 * Assembles a running gateway from a Config: the endpoint table, the
 * scheduler and health workers, metrics, the fleet manager (when the config
 * has a fleet) and the three listeners. stop() stops fleet planning, closes
 * listeners, then lets in-flight requests finish (bounded), then stops the
 * workers.
 */
import type { Server } from "bun";
import { EndpointChooser } from "../admission/chooser.ts";
import { EndpointDirectory } from "../admission/endpoint-directory.ts";
import type { Config } from "../config/types.ts";
import { DcgmGpuStore } from "../metrics/gpu-collector.ts";
import { GatewayMetrics } from "../metrics/registry.ts";
import { OTHER_TENANT } from "../metrics/names.ts";
import type { PolledEndpoint } from "../protocol/health-messages.ts";
import type { EndpointDescriptor } from "../protocol/scheduler-messages.ts";
import { PrefixIndex } from "../scheduling/prefix-index.ts";
import { SchedulingProfile } from "../scheduling/profile.ts";
import { AdmissionStatsTable, EndpointTable, I, PoolTable, Signals } from "../shared/endpoint-table.ts";
import { GpuSaturationTable } from "../shared/gpu-saturation-table.ts";
import { logger, logListening, type Logger } from "../shared/logger.ts";
import { loopLag } from "../shared/loop-lag.ts";
import { AdmissionClient } from "./admission-client.ts";
import { createAdminApp, createMetricsApp } from "./admin.ts";
import { CircuitBreakers } from "./circuit-breaker.ts";
import { ContinuationPolicy } from "./continuation/continuation-policy.ts";
import type { FleetManager } from "../control/fleet-manager.ts";
import { openGatewayFleet, type GatewayFleet } from "./fleet-control.ts";
import { registerFleetMetrics } from "./fleet-metrics.ts";
import { dashboardSource } from "./dashboard-source.ts";
import type { GatewayContext } from "./context.ts";
import { EndpointRegistry, MAX_POOLS } from "./endpoints.ts";
import { Authenticator } from "./gates/auth.ts";
import { QuotaLimiter } from "./gates/quota.ts";
import { HealthClient } from "./health-client.ts";
import { ModelCatalog } from "./model-catalog.ts";
import { DialGuard } from "./proxy/dial-guard.ts";
import { RetryBudget } from "./retry-budget.ts";
import { startDataPlane } from "./server.ts";
import { ResponseCache } from "../cache/response-cache.ts";
import { JobsMetrics } from "../metrics/jobs-metrics.ts";
import { batchLineSend } from "./batch-line-send.ts";
import { GatewayJobs } from "./jobs-service.ts";
import type { SendLine } from "../jobs/batch-runner.ts";
import { ClusterRuntime } from "../cluster/cluster-runtime.ts";
import { openStateBackend, type StateBackend } from "../cluster/state-backend.ts";
import { registerClusterMetrics } from "../metrics/cluster-metrics.ts";
import { PoolShareTable } from "../shared/pool-shares.ts";

const DRAIN_GRACE_MS = 10_000;

export interface RunningGateway {
  ctx: GatewayContext;
  /** Base URLs of the listeners. */
  urls: { api: string; admin: string; metrics: string | undefined };
  /** The control plane, when the config has a fleet. */
  fleet: FleetManager | undefined;
  /** Where shared state lives (state.backend), and this gateway's part in a cluster (redis only). */
  state: StateBackend;
  cluster: ClusterRuntime | undefined;
  stop(): Promise<void>;
}

function urlOf(server: { hostname?: string | undefined; port?: number | undefined }): string {
  const host = server.hostname === "0.0.0.0" || !server.hostname ? "127.0.0.1" : server.hostname;
  return `http://${host.includes(":") ? `[${host}]` : host}:${server.port}`;
}

export async function startGateway(config: Config, opts: { log?: Logger; defaultMetrics?: boolean } = {}): Promise<RunningGateway> {
  const log = opts.log ?? logger();
  for (const w of config.warnings) log.warn(w);
  const bandNames = config.admission.bands.map((b) => b.name);
  const table = new EndpointTable(config.maxEndpoints);
  const pools = new PoolTable(MAX_POOLS, bandNames.length);
  const stats = new AdmissionStatsTable(bandNames.length, MAX_POOLS);
  const signals = new Signals();
  /** Per pool, until when its GPUs are saturated (the health worker writes it with a gpu_health block; all 0 without). */
  const gpuSaturation = new GpuSaturationTable(MAX_POOLS);
  const prefixIndex = new PrefixIndex(config.scheduling.prefixAffinity.lruEntries);
  const catalog = new ModelCatalog(config);
  const gpuStore = new DcgmGpuStore(config.health.staleAfterMs);
  let enginesPolled = false;

  let metricsRef: GatewayMetrics | undefined;
  const breakers = new CircuitBreakers(table, config.circuitBreaker, (index, field, state) => {
    const id = registry.idOf(index) ?? String(index);
    if (field === I.CIRCUIT) {
      metricsRef?.circuitTransitions.inc({ endpoint: id, state });
      log.warn({ endpoint: id, state }, "circuit breaker");
      return;
    }
    const model = registry.descriptor(index)?.models[field - I.MODEL_CIRCUITS] ?? "unknown";
    metricsRef?.modelCircuitTransitions.inc({ endpoint: id, model, state });
    log.warn({ endpoint: id, model, state }, "model circuit breaker");
  });
  const registry = new EndpointRegistry(table, catalog, new DialGuard(config.maxEndpoints), breakers);
  for (const e of config.endpoints) registry.add(e);
  // Opened before any worker starts: an unusable data_dir, or a Redis that does not answer, stops the start with nothing to clean up.
  const state = await openStateBackend(config);
  // Several gateways (state.backend: redis): lease, demand exchange and shared quotas; the pool table's rows are the registry's pools.
  const shares = new PoolShareTable(MAX_POOLS);
  const cluster = state.redis
    ? new ClusterRuntime(config, state.redis, { shares, demand: { pools: () => registry.pools(), demand: (pool) => pools.held(pool) + pools.queued(pool) } })
    : undefined;
  // pollAgents is first called by fleet.start(), once the health worker below exists.
  const fleet: GatewayFleet | undefined = await openGatewayFleet(config, {
    registry,
    pollAgents: (agents, settings) => health.pollAgents(agents, settings),
    log,
    store: state.shared?.fleet,
    leadership: cluster?.leadership(),
  });
  const slots = registry.active().map((e) => e.index);
  const directory = new EndpointDirectory(slots.map((i) => registry.descriptor(i)).filter((d): d is EndpointDescriptor => d !== undefined));
  const chooser = new EndpointChooser(table, directory, new SchedulingProfile(config.scheduling, undefined, prefixIndex), config.health.staleAfterMs);

  const admission = new AdmissionClient(
    {
      endpoints: table.buffer,
      pools: pools.buffer,
      stats: stats.buffer,
      signals: signals.buffer,
      prefixIndex: prefixIndex.buffer,
      shares: cluster ? shares.buffer : undefined,
      maxEndpoints: config.maxEndpoints,
      maxPools: MAX_POOLS,
      directory: directory.all(),
      scheduling: config.scheduling,
      admission: config.admission,
      staleAfterMs: config.health.staleAfterMs,
    },
    table,
    pools,
    directory,
    chooser,
    config.admission,
    // A grant for a request whose client already left (its claim is already returned): free the probe slot.
    (index, probe) => breakers.abandon(index, probe),
  );
  const health = new HealthClient(
    {
      buffer: table.buffer,
      maxEndpoints: config.maxEndpoints,
      signals: signals.buffer,
      endpoints: slots.map((i) => registry.polled(i)).filter((e): e is PolledEndpoint => e !== undefined),
      health: config.health,
      gpuHealth: config.gpuHealth,
      gpuSaturation: gpuSaturation.buffer,
    },
    {
      models(index, models) {
        if (registry.modelsDiscovered(index, models)) log.info({ endpoint: registry.idOf(index), models }, "endpoint models discovered");
      },
      readiness(index, ready, healthy, error) {
        log.info({ endpoint: registry.idOf(index), ready, healthy, error }, "endpoint readiness");
      },
      enginesPolled() {
        enginesPolled = true;
      },
      gpus(report) {
        gpuStore.update(report);
      },
      agent(node, snapshot) {
        fleet?.onAgentSnapshot(node, snapshot);
      },
    },
    log,
  );
  registry.attach({
    setEndpoint: (index, d) => admission.setEndpoint(index, d),
    setModels: (index, models) => admission.setModels(index, models),
    pollEndpoint: (index, e) => health.pollEndpoint(index, e),
  });

  const metrics = new GatewayMetrics(table, () => registry.active(), {
    defaultMetrics: opts.defaultMetrics ?? true,
    stats,
    bandNames,
    pools: () => registry.pools(),
    schedulerMessages: () => admission.posted,
  });
  metricsRef = metrics;
  loopLag.onStall = (seconds) => metrics.loopStalls.observe(seconds);
  loopLag.start();
  const fleetReads = registerFleetMetrics({
    registry: metrics.registry,
    gpuStore,
    fleet: fleet?.manager,
    staleAfterMs: config.health.staleAfterMs,
    pools,
    bandNames,
    poolList: () => registry.pools(),
  });
  const tenantNames = new Set(config.tenants.map((t) => t.name));
  // Issue 12: batch jobs (their lines run through ctx's own request path), idempotency, response cache, shedding.
  const poolRow = (name: string) => registry.pools().find((p) => p.name === name)?.index;
  const poolSaturated = (name: string) => {
    const row = poolRow(name);
    return row !== undefined && gpuSaturation.saturated(row, Date.now());
  };
  let ctxRef: GatewayContext | undefined;
  let send: SendLine | undefined;
  const jobs = new GatewayJobs({
    config,
    log,
    // The runner sends only once started, after ctx exists (jobs.resume() below, or a first request).
    send: (line, signal, meta) => (send ??= batchLineSend(ctxRef!))(line, signal, meta),
    saturated: poolSaturated,
    poolOf: (model) => {
      const canonical = catalog.resolve(model) ?? model;
      const row = admission.poolOf(canonical);
      return (row === undefined ? undefined : registry.poolName(row)) ?? "default";
    },
    knownModel: (name) => catalog.resolve(name) !== undefined,
    shared: state.shared,
  });
  const cache = new ResponseCache(config.responseCache, state.shared?.responseCache);
  const jobsMetrics = new JobsMetrics(metrics.registry, {
    pools: () => registry.pools().map((p) => p.name),
    ...(config.gpuHealth === null ? {} : { poolSaturated }),
    batchLineStats: () => jobs.lineStats(),
    ...(cache.off ? {} : { cacheStats: () => cache.stats() }),
    idempotentReplays: () => jobs.replays(),
  });
  const ctx: GatewayContext = {
    config,
    catalog,
    table,
    endpoints: registry,
    admission,
    breakers,
    budget: new RetryBudget(config.retry.budgetRatio, config.retry.minPerS),
    dial: registry.dial,
    metrics,
    log,
    usesPrefixHashes: config.scheduling.scorers.some((s) => (s.name === "prefix-affinity" || s.name === "prefix-rendezvous") && s.weight > 0),
    auth: new Authenticator(config.auth, config.admission),
    quota: cluster?.quota ?? new QuotaLimiter(config.tenants),
    continuation: new ContinuationPolicy(config.continuation),
    tenantLabel: (tenant) => (tenantNames.has(tenant) ? tenant : OTHER_TENANT),
    jobs,
    cache,
    gpuSaturation,
    jobsMetrics,
    cluster,
  };
  ctxRef = ctx;
  if (cluster) registerClusterMetrics(metrics.registry, () => cluster.status());
  await Promise.all([admission.whenReady(), health.whenReady()]);
  // Agents are polled by the health worker from here on; replicas join the registry as they turn Ready.
  cluster?.start();
  fleet?.start();

  const api = startDataPlane(ctx);
  // Batches a previous run left resume now (their in-flight lines re-driven), not at the first request.
  await jobs.resume();
  // A fleet's scrape waits for its nodes too (each answered once or turned NotReady: bounded by node_not_ready_after_ms).
  const listenerState = { enginesPolled: () => enginesPolled && (fleet?.manager.isSettled() ?? true) };
  const dashboard = dashboardSource({ ctx, reads: fleetReads, pools, stats, bandNames, poolList: () => registry.pools() });
  const admin = createAdminApp(ctx, listenerState, fleet?.api, dashboard).listen({ hostname: config.adminListen.host, port: config.adminListen.port });
  const metricsApp = config.metricsListen ? createMetricsApp(ctx, listenerState).listen({ hostname: config.metricsListen.host, port: config.metricsListen.port }) : undefined;
  const adminServer = admin.server as Server<unknown> | null;
  const metricsServer = metricsApp?.server as Server<unknown> | null | undefined;
  const urls = {
    api: urlOf(api),
    admin: urlOf({ hostname: adminServer?.hostname, port: adminServer?.port }),
    metrics: metricsServer ? urlOf({ hostname: metricsServer.hostname, port: metricsServer.port }) : undefined,
  };
  logListening(log, "api", urls.api);
  logListening(log, "admin", urls.admin);
  if (urls.metrics) logListening(log, "metrics", urls.metrics);

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      log.info("stopping: no new requests; waiting for in-flight ones");
      // First: no replica may join or leave the table while it shuts down (nothing running is stopped).
      await fleet?.stop();
      // Batch lines in flight are aborted and go back to pending: the next start on this data_dir (or another gateway on Redis) runs them.
      await jobs.stop();
      // The lease goes to another gateway at once; this one's demand stops counting.
      await cluster?.stop();
      await api.stop(false);
      const deadline = Date.now() + DRAIN_GRACE_MS;
      const inflight = () => {
        let n = 0;
        for (let row = 0; row < table.rows; row++) n += table.getInt(row, I.INFLIGHT);
        return n;
      };
      while (inflight() > 0 && Date.now() < deadline) await Bun.sleep(50);
      await api.stop(true);
      jobs.close();
      await admin.stop();
      await metricsApp?.stop();
      breakers.stop();
      admission.terminate();
      await health.stop();
      await state.close();
    })());
  return { ctx, urls, fleet: fleet?.manager, state, cluster, stop };
}
