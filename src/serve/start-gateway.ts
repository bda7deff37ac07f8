/**
 * Starts a gateway from a Config: the data plane (built by data-plane.ts),
 * the fleet manager and cluster runtime (when configured) and the three
 * listeners. stop() stops fleet planning, closes listeners, then lets
 * in-flight requests finish (bounded), then stops the workers.
 */
import type { Server } from "bun";
import { createAdminApp, createMetricsApp, type ListenerState } from "../admin/admin-listener.ts";
import { dashboardSource } from "../admin/dashboard/dashboard-source.ts";
import type { Config } from "../config/types.ts";
import type { FleetManager } from "../control/fleet-manager.ts";
import type { GatewayContext } from "../gateway/context.ts";
import { startDataPlane } from "../gateway/server.ts";
import { I } from "../shared/endpoint-table.ts";
import { type Logger, logger, logListening } from "../shared/logger.ts";
import { bindExplained, ensurePortsFree, type ListenerSpec } from "../shared/port-holder.ts";
import type { ClusterRuntime } from "../shared-state/cluster-runtime.ts";
import type { StateBackend } from "../shared-state/state-backend.ts";
import type { ConfigReloader } from "./config-reload.ts";
import { buildDataPlane } from "./data-plane.ts";
import type { GatewayFleet } from "./fleet-wiring.ts";

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
  /** Re-reads the config file and applies what can change live (absent when started without `reread`). */
  reload: ConfigReloader["reload"] | undefined;
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
function startAdminListeners(
  ctx: GatewayContext,
  state: ListenerState,
  fleetApi: GatewayFleet["api"] | undefined,
  dashboard: ReturnType<typeof dashboardSource>,
  reload: ConfigReloader["reload"] | undefined,
) {
  const { config, log } = ctx;
  const specs = listenerSpecs(config);
  // Elysia's listen turns SO_REUSEPORT on: two gateways would then share a held port silently. A held port must fail the start.
  const admin = bindExplained(specs.admin, GATEWAY, () =>
    createAdminApp(ctx, state, fleetApi, dashboard, reload).listen({ hostname: config.adminListen.host, port: config.adminListen.port, reusePort: false }),
  );
  const metricsSpec = specs.metrics;
  const metricsApp = metricsSpec
    ? bindExplained(metricsSpec, GATEWAY, () => createMetricsApp(ctx, state).listen({ hostname: metricsSpec.host, port: metricsSpec.port, reusePort: false }))
    : undefined;
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

export async function startGateway(
  config: Config,
  opts: { log?: Logger; defaultMetrics?: boolean /** Reads the config file again as at start: enables reloads. */; reread?: () => Config } = {},
): Promise<RunningGateway> {
  const log = opts.log ?? logger();
  await ensureListenersFree(config);
  for (const w of config.warnings) log.warn(w);
  const plane = await buildDataPlane(config, {
    log,
    ...(opts.defaultMetrics === undefined ? {} : { defaultMetrics: opts.defaultMetrics }),
    ...(opts.reread ? { reread: opts.reread } : {}),
  });
  const { ctx, tables: t, services, fleet, cluster, state } = plane;
  // Agents are polled by the health worker from here on; replicas join the registry as they turn Ready.
  cluster?.start();
  fleet?.start();

  const api = bindExplained(listenerSpecs(config).api, GATEWAY, () => startDataPlane(ctx, () => plane.live.current));
  // Batches a previous run left resume now (their in-flight lines re-driven), not at the first request.
  await services.jobs.resume();
  // Background responses a previous run left (or other gateways queued in Redis) are taken up now.
  await services.responses.resume();
  // A fleet's scrape waits for its nodes too (each answered once or turned NotReady: bounded by node_not_ready_after_ms).
  const listenerState = { enginesPolled: plane.discovered };
  const poolList = () => plane.registry.pools();
  const dashboard = dashboardSource({ ctx, reads: plane.fleetReads, pools: t.pools, stats: t.stats, bandNames: plane.bandNames, poolList });
  const apiUrl = urlOf(api);
  logListening(log, "api", apiUrl);
  const reloader = plane.reloader;
  const reload = reloader ? (trigger: "signal" | "admin") => reloader.reload(trigger) : undefined;
  const { admin, metricsApp, urls: adminUrls } = startAdminListeners(ctx, listenerState, fleet?.api, dashboard, reload);
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
      await admin.stop();
      await metricsApp?.stop();
      await plane.close();
    })());
  return { ctx, urls, fleet: fleet?.manager, state, cluster, reload, stop };
}
