/** Typed messages between the main thread and the scheduler worker (workers/scheduler.ts). */
import type { Config } from "../config/types.ts";
import type { ErrorCode } from "../shared/errors.ts";

export interface EndpointDescriptor {
  index: number;
  id: string;
  pool: string;
  /** Configured models, or [] until discovery reports them. */
  models: string[];
}

/** main → scheduler */
export type ToScheduler =
  | { type: "init"; buffer: SharedArrayBuffer; endpoints: EndpointDescriptor[]; scheduling: Config["scheduling"]; staleAfterMs: number }
  | { type: "models"; index: number; models: string[] }
  | { type: "schedule"; id: number; model: string; prefixHashes: number[]; exclude: number[] };

/** The chosen endpoint's per-scorer scores and per-filter drops travel back for the metrics. */
export interface GrantDetail {
  scores: Record<string, number>;
  drops: Record<string, number>;
}

/** scheduler → main */
export type FromScheduler =
  | { type: "ready" }
  | ({ type: "grant"; id: number; index: number } & GrantDetail)
  | { type: "reject"; id: number; error: { code: ErrorCode; message: string }; drops: Record<string, number> };
