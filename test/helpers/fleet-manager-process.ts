/**
 * A FleetManager as its own process, for tests that must SIGKILL it (what
 * the gateway will host once wired): config JSON in argv[2], the management
 * API on 127.0.0.1:0 (logged as the "admin" listening line), agents polled
 * in process, and every endpoint-sink call printed as one JSON line
 * `{"fleetSink":…}` on stdout. In-flight counts are always 0.
 */
import { buildConfig } from "../../src/config/load.ts";
import type { EndpointSink } from "../../src/control/endpoint-sink.ts";
import { FleetManager } from "../../src/control/fleet-manager.ts";
import { SqliteFleetStore } from "../../src/control/sqlite-store.ts";
import { AgentPoller } from "../../src/polling/agent-poller.ts";
import { initLogger, logListening } from "../../src/shared/logger.ts";
import { serveFleetApi } from "./fleet.ts";

const config = buildConfig(JSON.parse(process.argv[2] ?? "{}"), {}, "argv");
const log = initLogger({ role: "fleet-test" });
const emit = (event: Record<string, unknown>) => console.log(JSON.stringify({ fleetSink: event }));
const sink: EndpointSink = {
  addEndpoint: (e) => emit({ kind: "add", id: e.id, node: e.node, url: e.url }),
  setDraining: (id, draining) => emit({ kind: "draining", id, draining }),
  inflight: () => 0,
  removeEndpoint: (id) => emit({ kind: "remove", id }),
};
const store = new SqliteFleetStore(config.dataDir);
let manager: FleetManager | undefined;
const poller = new AgentPoller(
  { intervalMs: config.fleet.agentPollIntervalMs, timeoutMs: config.fleet.agentPollTimeoutMs, staleAfterMs: 5_000 },
  (node, snap) => manager?.onAgentSnapshot(node, snap),
);
manager = await FleetManager.open({ config, store, sink, pollAgents: (agents) => poller.setTargets(agents), log });
manager.start();
poller.start();
const api = serveFleetApi(manager);
logListening(log, "admin", api.url);
