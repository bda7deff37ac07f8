/**
 * Assembles a running gateway from a Config: the endpoint table, the
 * scheduler and health workers, metrics, and the three listeners. stop()
 * closes listeners first, then lets in-flight requests finish (bounded), then
 * stops the workers.
 */
import type { Server } from "bun";
import type { Config } from "../config/types.ts";
import { GatewayMetrics } from "../metrics/registry.ts";
import type { FromHealth, ToHealth } from "../protocol/health-messages.ts";
import { AdmissionStatsTable, EndpointTable, I } from "../shared/endpoint-table.ts";
import { OTHER_TENANT } from "../metrics/names.ts";
import { Authenticator } from "./gates/auth.ts";
import { QuotaLimiter } from "./gates/quota.ts";
import { logger, logListening, type Logger } from "../shared/logger.ts";
import { createAdminApp, createMetricsApp } from "./admin.ts";
import { CircuitBreakers } from "./circuit-breaker.ts";
import type { GatewayContext } from "./context.ts";
import { ModelCatalog } from "./model-catalog.ts";
import { DialGuard } from "./proxy/dial-guard.ts";
import { RetryBudget } from "./retry-budget.ts";
import { SchedulerClient } from "./scheduler-client.ts";
import { startDataPlane } from "./server.ts";

const HEALTH_WORKER_URL = new URL("../../workers/health.ts", import.meta.url);
const DRAIN_GRACE_MS = 10_000;

export interface RunningGateway {
  ctx: GatewayContext;
  /** Base URLs of the listeners. */
  urls: { api: string; admin: string; metrics: string | undefined };
  stop(): Promise<void>;
}

function urlOf(server: { hostname?: string | undefined; port?: number | undefined }): string {
  const host = server.hostname === "0.0.0.0" || !server.hostname ? "127.0.0.1" : server.hostname;
  return `http://${host.includes(":") ? `[${host}]` : host}:${server.port}`;
}

export async function startGateway(config: Config, opts: { log?: Logger; defaultMetrics?: boolean } = {}): Promise<RunningGateway> {
  const log = opts.log ?? logger();
  const table = new EndpointTable(config.endpoints.length);
  const pools = [...new Set(config.endpoints.map((e) => e.pool))];
  const bandNames = config.admission.bands.map((b) => b.name);
  const stats = new AdmissionStatsTable(bandNames.length, pools.length);
  const catalog = new ModelCatalog(config);
  const metrics = new GatewayMetrics(
    table,
    config.endpoints.map((e) => e.id),
    { defaultMetrics: opts.defaultMetrics ?? true, stats, bandNames, poolNames: pools },
  );
  for (const w of config.warnings) log.warn(w);
  let breakersRef: CircuitBreakers | undefined;
  const scheduler = new SchedulerClient(
    {
      buffer: table.buffer,
      statsBuffer: stats.buffer,
      endpoints: config.endpoints.map((e, index) => ({ index, id: e.id, pool: e.pool, models: [...(e.models ?? [])] })),
      pools,
      scheduling: config.scheduling,
      admission: config.admission,
      staleAfterMs: config.health.staleAfterMs,
    },
    // A grant for a request whose client already left: return the lease.
    (index, probe) => {
      table.addInt(index, I.LEASED, -1);
      if (probe) breakersRef?.abandon(index);
    },
    () => bandNames.some((_, b) => stats.depth(b) > 0),
  );
  const breakers = new CircuitBreakers(table, config.circuitBreaker, (index, state) => {
    const id = config.endpoints[index]?.id ?? String(index);
    metrics.circuitTransitions.inc({ endpoint: id, state });
    log.warn({ endpoint: id, state }, "circuit breaker");
  });
  breakersRef = breakers;
  const tenantNames = new Set(config.tenants.map((t) => t.name));
  const ctx: GatewayContext = {
    config,
    catalog,
    table,
    scheduler,
    breakers,
    budget: new RetryBudget(config.retry.budgetRatio, config.retry.minPerS),
    dial: new DialGuard(config.endpoints.map((e) => e.url)),
    metrics,
    log,
    usesPrefixHashes: config.scheduling.scorers.some((s) => s.name === "prefix-affinity" && s.weight > 0),
    auth: new Authenticator(config.auth, config.admission),
    quota: new QuotaLimiter(config.tenants),
    tenantLabel: (tenant) => (tenantNames.has(tenant) ? tenant : OTHER_TENANT),
  };

  const health = new Worker(HEALTH_WORKER_URL.href);
  const healthReady = new Promise<void>((resolve) => {
    health.onmessage = (event: MessageEvent<FromHealth>) => {
      const msg = event.data;
      switch (msg.type) {
        case "ready":
          resolve();
          return;
        case "models":
          if (catalog.setDiscovered(msg.index, msg.models)) {
            scheduler.setModels(msg.index, msg.models);
            log.info({ endpoint: config.endpoints[msg.index]?.id, models: msg.models }, "endpoint models discovered");
          }
          return;
        case "readiness":
          log.info({ endpoint: config.endpoints[msg.index]?.id, ready: msg.ready, healthy: msg.healthy, error: msg.error }, "endpoint readiness");
          return;
        case "agent":
          // Node agent polls feed the fleet manager (FleetManager.onAgentSnapshot) once it is wired in (issue 9).
          return;
        default: {
          const unreachable: never = msg;
          throw new Error(`unknown health message ${JSON.stringify(unreachable)}`);
        }
      }
    };
  });
  health.postMessage({
    type: "init",
    buffer: table.buffer,
    health: config.health,
    endpoints: config.endpoints.map((e, index) => ({
      index,
      id: e.id,
      url: e.url,
      engine: e.engine,
      models: e.models ? [...e.models] : undefined,
      gpuIds: [...e.gpuIds],
      dcgmUrl: e.dcgmUrl,
    })),
  } satisfies ToHealth);
  await Promise.all([scheduler.whenReady(), healthReady]);

  const api = startDataPlane(ctx);
  const admin = createAdminApp(ctx).listen({ hostname: config.adminListen.host, port: config.adminListen.port });
  const metricsApp = config.metricsListen ? createMetricsApp(ctx).listen({ hostname: config.metricsListen.host, port: config.metricsListen.port }) : undefined;
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
      await api.stop(false);
      const deadline = Date.now() + DRAIN_GRACE_MS;
      const inflight = () => {
        let n = 0;
        for (let row = 0; row < table.rows; row++) n += table.getInt(row, I.INFLIGHT);
        return n;
      };
      while (inflight() > 0 && Date.now() < deadline) await Bun.sleep(50);
      await api.stop(true);
      await admin.stop();
      await metricsApp?.stop();
      breakers.stop();
      health.postMessage({ type: "stop" } satisfies ToHealth);
      scheduler.terminate();
      await Bun.sleep(10);
      health.terminate();
    })());
  return { ctx, urls, stop };
}
