/**
 * Assembles a running gateway from a Config: the endpoint table, the
 * scheduler and health workers, metrics, the fleet manager (when the config
 * has a fleet) and the three listeners. stop() stops fleet planning, closes
 * listeners, then lets in-flight requests finish (bounded), then stops the
 * workers. The stages themselves are in gateway-parts.ts.
 */
import type { Server } from "bun";
import { ClusterRuntime } from "../shared-state/cluster-runtime.ts";
import { openStateBackend, type StateBackend } from "../shared-state/state-backend.ts";
import type { Config } from "../config/types.ts";
import type { FleetManager } from "../control/fleet-manager.ts";
import { registerClusterMetrics } from "../metrics/cluster-metrics.ts";
import { DcgmGpuStore } from "../metrics/gpu-collector.ts";
import { OTHER_TENANT } from "../metrics/names.ts";
import { GatewayMetrics } from "../metrics/registry.ts";
import { I } from "../shared/endpoint-table.ts";
import { logger, logListening, type Logger } from "../shared/logger.ts";
import { loopLag } from "../shared/loop-lag.ts";
import { bindExplained, ensurePortsFree, type ListenerSpec } from "../shared/port-holder.ts";
import { createAdminApp, createMetricsApp, type ListenerState } from "../admin/admin-listener.ts";
import type { GatewayContext } from "../gateway/context.ts";
import { RouteSupport } from "../gateway/route-support.ts";
import { ContinuationPolicy } from "../gateway/continuation-policy.ts";
import { dashboardSource } from "../admin/dashboard/dashboard-source.ts";
import { openGatewayFleet, type GatewayFleet } from "./fleet-wiring.ts";
import { registerFleetMetrics } from "../admin/fleet-collectors.ts";
import { openBatchServices, openRegistry, sharedTables, startWorkers, type Workers } from "./gateway-parts.ts";
import { Authenticator } from "../gateway/api-keys.ts";
import { QuotaLimiter } from "../admission/tenant-quota.ts";
import type { HealthEvents } from "./health-client.ts";
import { ModelCatalog } from "../gateway/model-catalog.ts";
import { AdapterCatalog } from "../gateway/adapter-catalog.ts";
import { endpointAdaptersReader } from "./endpoint-adapters.ts";
import { RetryBudget } from "../gateway/retry-budget.ts";
import { startDataPlane } from "../gateway/server.ts";
import { NO_TOKENIZE_TARGET, PromptTokenizer } from "../gateway/prompt-tokens.ts";
import { registerKvEventsMetrics } from "../metrics/kv-events-metrics.ts";
import { tokenizeTarget } from "./tokenize-target.ts";

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

const GATEWAY = { command: "serve", unit: "llmgw" } as const;

/** The gateway's listeners with the flags that move them (serve's and demo's alike). */
function listenerSpecs(config: Config): { api: ListenerSpec; admin: ListenerSpec; metrics: ListenerSpec | undefined } {
  return {
    api: { what: "API listener", ...config.listen, flag: "--listen" },
    admin: { what: "admin listener", ...config.adminListen, flag: "--admin-listen" },
    metrics: config.metricsListen ? { what: "metrics listener", ...config.metricsListen, flag: "--metrics-listen" } : undefined,
  };
}

/**
 * Throws PortInUseError (one line: the port, its holder where /proc says,
 * the flag that moves the listener) when a listener's port is taken: checked
 * before anything starts, so there is nothing to stop.
 */
export async function ensureListenersFree(config: Config): Promise<void> {
  const l = listenerSpecs(config);
  await ensurePortsFree([l.api, l.admin, ...(l.metrics ? [l.metrics] : [])], GATEWAY);
}

/** The admin listener (management API, dashboard, /metrics) and the optional metrics-only one. */
function startAdminListeners(ctx: GatewayContext, state: ListenerState, fleetApi: GatewayFleet["api"] | undefined, dashboard: ReturnType<typeof dashboardSource>) {
  const { config, log } = ctx;
  const specs = listenerSpecs(config);
  // Elysia's listen turns SO_REUSEPORT on: two gateways would then share a held port silently. A held port must fail the start.
  const admin = bindExplained(specs.admin, GATEWAY, () => createAdminApp(ctx, state, fleetApi, dashboard).listen({ hostname: config.adminListen.host, port: config.adminListen.port, reusePort: false }));
  const metricsSpec = specs.metrics;
  const metricsApp = metricsSpec ? bindExplained(metricsSpec, GATEWAY, () => createMetricsApp(ctx, state).listen({ hostname: metricsSpec.host, port: metricsSpec.port, reusePort: false })) : undefined;
  const adminServer = admin.server as Server<unknown> | null;
  const metricsServer = metricsApp?.server as Server<unknown> | null | undefined;
  const urls = {
    admin: urlOf({ hostname: adminServer?.hostname, port: adminServer?.port }),
    metrics: metricsServer ? urlOf({ hostname: metricsServer.hostname, port: metricsServer.port }) : undefined,
  };
  logListening(log, "admin", urls.admin);
  if (urls.metrics) logListening(log, "metrics", urls.metrics);
  return { admin, metricsApp, urls };
}

export async function startGateway(config: Config, opts: { log?: Logger; defaultMetrics?: boolean } = {}): Promise<RunningGateway> {
  const log = opts.log ?? logger();
  await ensureListenersFree(config);
  for (const w of config.warnings) log.warn(w);
  const bandNames = config.admission.bands.map((b) => b.name);
  const t = sharedTables(config);
  const adapters = new AdapterCatalog();
  const catalog = new ModelCatalog(config, adapters);
  const gpuStore = new DcgmGpuStore(config.health.staleAfterMs);
  let metrics: GatewayMetrics | undefined;
  const { registry, breakers } = openRegistry(config, t, catalog, log, () => metrics);
  // Opened before any worker starts: an unusable data_dir, or a Redis that does not answer, stops the start with nothing to clean up.
  const state = await openStateBackend(config);
  // Several gateways (state.backend: redis): lease, demand exchange and shared quotas; the pool table's rows are the registry's pools.
  const cluster = state.redis
    ? new ClusterRuntime(config, state.redis, { shares: t.shares, demand: { pools: () => registry.pools(), demand: (pool) => t.pools.held(pool) + t.pools.queued(pool) } })
    : undefined;
  // Before the workers: a fleet store's replicas join the registry first. pollAgents is first called by fleet.start(), below.
  let workers: Workers | undefined;
  const fleet: GatewayFleet | undefined = await openGatewayFleet(config, {
    registry,
    pollAgents: (agents, settings) => workers!.health.pollAgents(agents, settings),
    log,
    store: state.shared?.fleet,
    leadership: cluster?.leadership(),
    adapters: {
      demand: adapters,
      of: endpointAdaptersReader(adapters, t.lora, t.table, config.health.staleAfterMs),
      declared: (list) => adapters.setDeclared(list),
    },
  });
  // A model the fleet wants replicas of is answered 503 while none is ready, not 404.
  if (fleet) catalog.expectDesired((name) => fleet.manager.state.models.has(name));
  let enginesPolled = false;
  const events: HealthEvents = {
    models(index, models, listed) {
      if (registry.modelsDiscovered(index, models)) log.info({ endpoint: registry.idOf(index), models }, "endpoint models discovered");
      if (registry.idOf(index) !== undefined && adapters.setEndpoint(index, listed)) log.info({ endpoint: registry.idOf(index), adapters: listed.map((a) => a.name) }, "endpoint LoRA adapters");
    },
    adapterIds: (names) => adapters.setIds(names),
    readiness(index, ready, healthy, error) {
      // An upstream that cannot be reached (or whose /health fails) is an operator's business: warn.
      if (!healthy) log.warn({ endpoint: registry.idOf(index), url: registry.urlOf(index), ready, healthy, error }, "endpoint unreachable or unhealthy");
      else log.info({ endpoint: registry.idOf(index), ready, healthy, error }, "endpoint readiness");
    },
    enginesPolled: () => (enginesPolled = true),
    gpus: (report) => gpuStore.update(report),
    agent: (node, snapshot) => fleet?.onAgentSnapshot(node, snapshot),
  };
  workers = await startWorkers(config, t, registry, { breakers, clustered: cluster !== undefined, events, log, adapters });
  const { admission, health, kvEvents } = workers;

  metrics = new GatewayMetrics(t.table, () => registry.active(), {
    defaultMetrics: opts.defaultMetrics ?? true,
    stats: t.stats,
    bandNames,
    pools: () => registry.pools(),
    schedulerMessages: () => admission.posted,
    lora: t.lora,
    staleAfterMs: config.health.staleAfterMs,
  });
  const gatewayMetrics = metrics;
  loopLag.onStall = (seconds, cause) => gatewayMetrics.loopStalls.observe({ cause }, seconds);
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
  // What the gateway serves is known once every endpoint was polled once (its models discovered) and a fleet has settled.
  const discovered = async () => {
    while (!(enginesPolled && (fleet?.manager.isSettled() ?? true))) await Bun.sleep(50);
  };
  const services = openBatchServices(config, { log, state, catalog, registry, admission, gpuSaturation: t.gpuSaturation, metrics, ctx: () => ctx, discovered });
  const tenantNames = new Set(config.tenants.map((tenant) => tenant.name));
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
    usesPrefixHashes: config.scheduling.scorers.some((s) => (s.name === "prefix-affinity" || s.name === "prefix-rendezvous" || s.name === "precise-prefix") && s.weight > 0),
    promptTokens: new PromptTokenizer(
      config.kvEvents.tokenize,
      // Without a precise-prefix scorer nothing reads token ids: never ask for them.
      config.scheduling.scorers.some((s) => s.name === "precise-prefix" && s.weight > 0) ? tokenizeTarget(kvEvents, workers.directory, t.table, t.kvStats, (i) => registry.urlOf(i)) : NO_TOKENIZE_TARGET,
      kvMetrics,
    ),
    auth: new Authenticator(config.auth, config.admission),
    quota: cluster?.quota ?? new QuotaLimiter(config.tenants),
    continuation: new ContinuationPolicy(config.continuation),
    routes: new RouteSupport(config.endpoints),
    tenantLabel: (tenant) => (tenantNames.has(tenant) ? tenant : OTHER_TENANT),
    ...services,
    gpuSaturation: t.gpuSaturation,
    cluster,
    ...(fleet ? { adapterLoads: { requested: () => fleet.manager.requestTick(), waitMs: config.fleet.adapterLoadWaitMs } } : {}),
  };
  // Agents are polled by the health worker from here on; replicas join the registry as they turn Ready.
  cluster?.start();
  fleet?.start();

  const api = bindExplained(listenerSpecs(config).api, GATEWAY, () => startDataPlane(ctx));
  // Batches a previous run left resume now (their in-flight lines re-driven), not at the first request.
  await services.jobs.resume();
  // Background responses a previous run left (or other gateways queued in Redis) are taken up now.
  await services.responses.resume();
  // A fleet's scrape waits for its nodes too (each answered once or turned NotReady: bounded by node_not_ready_after_ms).
  const listenerState = { enginesPolled: () => enginesPolled && (fleet?.manager.isSettled() ?? true) };
  const dashboard = dashboardSource({ ctx, reads: fleetReads, pools: t.pools, stats: t.stats, bandNames, poolList: () => registry.pools() });
  const apiUrl = urlOf(api);
  logListening(log, "api", apiUrl);
  const { admin, metricsApp, urls: adminUrls } = startAdminListeners(ctx, listenerState, fleet?.api, dashboard);
  const urls = { api: apiUrl, ...adminUrls };

  const inflight = () => {
    let n = 0;
    for (let row = 0; row < t.table.rows; row++) n += t.table.getInt(row, I.INFLIGHT);
    return n;
  };
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      log.info("stopping: no new requests; waiting for in-flight ones");
      // First: no replica may join or leave the table while it shuts down (nothing running is stopped).
      await fleet?.stop();
      // Batch lines in flight are aborted and go back to pending: the next start on this data_dir (or another gateway on Redis) runs them.
      await services.jobs.stop();
      // Background responses running here are aborted; their leases lapse and the next start (or another gateway) runs them.
      await services.responses.stop();
      // The lease goes to another gateway at once; this one's demand stops counting.
      await cluster?.stop();
      await api.stop(false);
      const deadline = Date.now() + DRAIN_GRACE_MS;
      while (inflight() > 0 && Date.now() < deadline) await Bun.sleep(50);
      await api.stop(true);
      services.jobs.close();
      services.responses.close();
      await admin.stop();
      await metricsApp?.stop();
      breakers.stop();
      admission.terminate();
      await Promise.all([health.stop(), kvEvents.stop()]);
      await state.close();
    })());
  return { ctx, urls, fleet: fleet?.manager, state, cluster, stop };
}
