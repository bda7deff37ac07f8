/** Typed messages between the main thread and the health worker (workers/health.ts). */
import type { Config, EngineFlavor } from "../config/types.ts";
import type { GpuReportMessage } from "./gpu-report.ts";

export interface PolledEndpoint {
  index: number;
  id: string;
  url: string;
  engine: EngineFlavor;
  models: string[] | undefined;
  gpuIds: string[];
  dcgmUrl: string | undefined;
}

/** main → health */
export type ToHealth =
  | { type: "init"; buffer: SharedArrayBuffer; endpoints: PolledEndpoint[]; health: Config["health"] }
  | { type: "stop" };

/** health → main */
export type FromHealth =
  | { type: "ready" }
  /** The models an endpoint's /v1/models lists changed (sent on first discovery too). */
  | { type: "models"; index: number; models: string[] }
  /** Readiness changed (for logs). */
  | { type: "readiness"; index: number; ready: boolean; healthy: boolean; error: string | undefined }
  /** Every engine endpoint has been polled at least once (sent once; at start when there are none). */
  | { type: "engines-polled" }
  /** A DCGM exporter answered: its GPUs, for the metrics collector. */
  | GpuReportMessage;
