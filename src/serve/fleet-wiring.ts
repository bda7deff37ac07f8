/**
 * The fleet manager inside `llmgw serve`: opens its store in data_dir, hands
 * Ready replicas to the endpoint registry (RegistryEndpointSink), takes node
 * agent polls from the health worker, and provides the management API plugin
 * for the admin listener. A gateway with no fleet configuration runs none of
 * it and writes nothing to data_dir.
 */
import { accessSync, constants, existsSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { ConfigError } from "../config/load.ts";
import type { Config } from "../config/types.ts";
import type { AdapterDemand } from "../control/adapter-actions.ts";
import type { DemandSignals, PeerDemand } from "../control/autoscale/demand.ts";
import type { EndpointAdapters } from "../control/endpoint-sink.ts";
import { fleetApi } from "../control/fleet-api.ts";
import { type FleetLeadership, FleetManager } from "../control/fleet-manager.ts";
import { FLEET_DB_FILE, SqliteFleetStore } from "../control/sqlite-store.ts";
import type { FleetStore } from "../control/store.ts";
import type { EndpointRegistry } from "../gateway/endpoints.ts";
import type { AgentSnapshot } from "../protocol/agent-messages.ts";
import type { AgentPollSettings, PolledAgent } from "../protocol/health-messages.ts";
import type { Logger } from "../shared/logger.ts";
import { RegistryEndpointSink } from "./fleet-endpoint-sink.ts";
import { Late } from "./late.ts";

/**
 * Whether the gateway runs the control plane: some node, desired model or
 * fleet token is configured. Without any, there is nothing to manage and
 * data_dir is left alone (a read-only working directory stays fine).
 */
export function fleetEnabled(config: Pick<Config, "nodes" | "fleet">): boolean {
  const f = config.fleet;
  return config.nodes.length > 0 || f.models.length > 0 || f.adminToken !== undefined || f.registrationToken !== undefined;
}

/** Why the fleet store could not be created in `dataDir` (undefined: it can), without creating anything. */
export function dataDirProblem(dataDir: string): string | undefined {
  let dir = resolve(dataDir);
  // The nearest existing ancestor must be a writable directory (mkdir -p creates the rest).
  while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir);
  if (!statSync(dir).isDirectory()) return `data_dir: ${resolve(dataDir)} cannot be created: ${dir} is not a directory`;
  try {
    accessSync(dir, constants.W_OK | constants.X_OK);
  } catch (err) {
    return `data_dir: ${resolve(dataDir)} cannot be created or written (${err instanceof Error ? err.message : String(err)})`;
  }
  const file = join(resolve(dataDir), FLEET_DB_FILE);
  if (existsSync(file)) {
    try {
      accessSync(file, constants.R_OK | constants.W_OK);
    } catch {
      return `data_dir: the fleet store ${file} is not readable and writable`;
    }
  }
  return undefined;
}

export interface GatewayFleet {
  manager: FleetManager;
  /** The management API (mount on the admin listener). */
  api: ReturnType<typeof fleetApi>;
  /** Start reconciling (once the health worker polls agents). */
  start(): void;
  /** A poll of one node agent from the health worker. */
  onAgentSnapshot(node: string, snapshot: AgentSnapshot): void;
  /** Stop planning and close the store; nothing running is stopped. */
  stop(): Promise<void>;
}

interface GatewayFleetDeps {
  registry: EndpointRegistry;
  /** The health worker's agent list (HealthClient.pollAgents). */
  pollAgents: (agents: PolledAgent[], settings: AgentPollSettings) => void;
  log: Logger;
  /** A shared store (state.backend: redis); absent: the embedded one in data_dir. Not closed here. */
  store?: FleetStore;
  /** Several gateways: lead (hold the lease) or follow. */
  leadership?: FleetLeadership;
  /** What the request path records of autoscaled models' requests (the autoscaler's input). */
  demand?: DemandSignals;
  /** Several gateways: followers' autoscaling demand, published for the leader. */
  peerDemand?: PeerDemand;
  /** LoRA adapters: what the gateway sees of requests for them and of each endpoint's (absent: the fleet loads none). */
  adapters?: {
    demand: AdapterDemand;
    of(slot: number): EndpointAdapters | undefined;
    declared(list: { name: string; base: string }[]): void;
  };
}

/** Open the control plane of a gateway; undefined when the config has no fleet. Throws ConfigError when data_dir is unusable. */
export async function openGatewayFleet(config: Config, deps: GatewayFleetDeps): Promise<GatewayFleet | undefined> {
  if (!fleetEnabled(config)) return undefined;
  const store = deps.store ?? openEmbeddedStore(config.dataDir);
  // The sink names a replica's node exporter from the node registry of the manager it serves; the manager calls it only once started.
  const opening = new Late<FleetManager>("fleet manager");
  const sink = new RegistryEndpointSink(deps.registry, (node) => opening.get().state.registry.get(node)?.dcgmUrl, deps.adapters?.of);
  const opened = opening.bind(
    await FleetManager.open({
      config,
      store,
      sink,
      pollAgents: deps.pollAgents,
      log: deps.log,
      leadership: deps.leadership,
      ...(deps.demand ? { demand: deps.demand } : {}),
      ...(deps.peerDemand ? { peerDemand: deps.peerDemand } : {}),
      ...(deps.adapters ? { adapterDemand: deps.adapters.demand, onDeclaredAdapters: deps.adapters.declared } : {}),
    }),
  );
  const api = fleetApi(opened, {
    adminToken: config.admin.token,
    registrationToken: config.fleet.registrationToken,
    registrationIntervalMs: config.fleet.registrationIntervalMs,
  });
  deps.log.info(
    { nodes: opened.state.registry.list().length, models: opened.state.models.size, store: deps.store ? "shared" : resolve(config.dataDir) },
    "fleet manager opened",
  );
  return {
    manager: opened,
    api,
    start() {
      opened.start();
    },
    onAgentSnapshot(node, snapshot) {
      opened.onAgentSnapshot(node, snapshot);
    },
    async stop() {
      await opened.stop();
      if (!deps.store) await store.close();
    },
  };
}

/** The embedded fleet store in data_dir; ConfigError naming data_dir when it cannot be used. */
function openEmbeddedStore(dataDir: string): SqliteFleetStore {
  const problem = dataDirProblem(dataDir);
  if (problem) throw new ConfigError("data_dir", [problem]);
  try {
    return new SqliteFleetStore(dataDir);
  } catch (err) {
    throw new ConfigError("data_dir", [`data_dir: cannot open the fleet store in ${resolve(dataDir)}: ${err instanceof Error ? err.message : String(err)}`]);
  }
}
