/** Typed messages between the main thread and the health worker (workers/health.ts). */
import type { Config, EngineFlavor } from "../config/types.ts";
import type { AgentSnapshot } from "./agent-messages.ts";

export interface PolledEndpoint {
  index: number;
  id: string;
  url: string;
  engine: EngineFlavor;
  models: string[] | undefined;
  gpuIds: string[];
  dcgmUrl: string | undefined;
}

/** A node agent the health worker polls (fleet manager, issue 9). */
export interface PolledAgent {
  node: string;
  url: string;
  token: string;
  dcgmUrl: string | undefined;
}

export interface AgentPollSettings {
  intervalMs: number;
  timeoutMs: number;
}

/** main → health */
export type ToHealth =
  | { type: "init"; buffer: SharedArrayBuffer; endpoints: PolledEndpoint[]; health: Config["health"] }
  /** The full list of agents to poll (replaces the previous one). */
  | { type: "agents"; agents: PolledAgent[]; settings: AgentPollSettings }
  | { type: "stop" };

/** health → main */
export type FromHealth =
  | { type: "ready" }
  /** The models an endpoint's /v1/models lists changed (sent on first discovery too). */
  | { type: "models"; index: number; models: string[] }
  /** Readiness changed (for logs). */
  | { type: "readiness"; index: number; ready: boolean; healthy: boolean; error: string | undefined }
  /** One poll of a node agent (every poll: the control plane ages the node by it). */
  | { type: "agent"; node: string; snapshot: AgentSnapshot };
