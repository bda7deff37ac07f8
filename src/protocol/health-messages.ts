/** Typed messages between the main thread and the health worker (workers/health.ts). */
import type { Config, EngineFlavor, GpuHealthConfig } from "../config/types.ts";
import type { AgentSnapshot } from "./agent-messages.ts";
import type { GpuReportMessage } from "./gpu-report.ts";

/** A LoRA adapter as vLLM lists it in /v1/models: an entry whose `parent` names the model it adapts. */
export interface ListedAdapter {
  name: string;
  parent: string;
}

export interface PolledEndpoint {
  /** Slot in the shared endpoint table. */
  index: number;
  id: string;
  url: string;
  engine: EngineFlavor;
  models: string[] | undefined;
  /** The configured models are authoritative (models_source: static). */
  staticModels: boolean;
  gpuIds: string[];
  dcgmUrl: string | undefined;
  /** Its pool, and the pool's row in the shared pool tables (GPU saturation is published per pool row). */
  pool: string;
  poolRow: number;
  /** Sent with each poll of the engine (its API key, configured headers); absent: none. */
  headers?: Record<string, string>;
}

/** A node agent the health worker polls (fleet manager). */
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
  | {
      type: "init";
      /** The shared endpoint table and its capacity in slots. */
      buffer: SharedArrayBuffer;
      maxEndpoints: number;
      /** Shared signal words (the metrics epoch the scheduler waits on). */
      signals: SharedArrayBuffer;
      endpoints: PolledEndpoint[];
      health: Config["health"];
      /** Sustained GPU saturation: null without a gpu_health block. */
      gpuHealth: GpuHealthConfig | null;
      /** The GpuSaturationTable the health worker publishes into. */
      gpuSaturation: SharedArrayBuffer;
      /** The LoraTable (src/shared/lora-table.ts) the health worker publishes each endpoint's adapters into. */
      lora?: SharedArrayBuffer;
    }
  /** An endpoint took a slot (poll it) or left it (null: stop). */
  | { type: "endpoint"; index: number; endpoint: PolledEndpoint | null }
  /** The full list of node agents to poll (replaces the previous one; fleet manager). */
  | { type: "agents"; agents: PolledAgent[]; settings: AgentPollSettings }
  | { type: "stop" };

/** health → main */
export type FromHealth =
  | { type: "ready" }
  /** The models an endpoint's /v1/models lists changed, or its LoRA adapters (sent on first discovery too). */
  | { type: "models"; index: number; models: string[]; adapters: ListedAdapter[] }
  /** Adapter names the health worker numbered (their ids index the LoRA table's bitmaps); sent before any message naming them. */
  | { type: "adapter-ids"; names: [string, number][] }
  /** Readiness changed (for logs). */
  | { type: "readiness"; index: number; ready: boolean; healthy: boolean; error: string | undefined }
  /** Every engine endpoint has been polled at least once (sent once; at start when there are none). */
  | { type: "engines-polled" }
  /** A DCGM exporter answered: its GPUs, for the metrics collector. */
  | GpuReportMessage
  /** One poll of a node agent (every poll: the control plane ages the node by it). */
  | { type: "agent"; node: string; snapshot: AgentSnapshot };
