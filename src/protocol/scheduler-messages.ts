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
  | {
      type: "init";
      buffer: SharedArrayBuffer;
      statsBuffer: SharedArrayBuffer;
      endpoints: EndpointDescriptor[];
      /** Distinct pool names, in the order of the stats table. */
      pools: string[];
      scheduling: Config["scheduling"];
      admission: Config["admission"];
      staleAfterMs: number;
    }
  | { type: "models"; index: number; models: string[] }
  /** A new request: admission (may queue), then scoring. */
  | { type: "admit"; id: number; model: string; band: number; tenant: string; estTokens: number; prefixHashes: number[] }
  /** A retry of an admitted request: scoring only, excluding endpoints that failed. */
  | { type: "schedule"; id: number; model: string; prefixHashes: number[]; exclude: number[] }
  /** The client left while its request was queued. */
  | { type: "cancel"; id: number }
  /** A request finished: capacity freed, queues may move. */
  | { type: "release" };

/** The chosen endpoint's per-scorer scores and per-filter drops travel back for the metrics. */
export interface GrantDetail {
  scores: Record<string, number>;
  drops: Record<string, number>;
  /** Time spent in the admission queue, ms (0 when it flowed at once). */
  waitedMs: number;
  /** This grant took a half-open circuit's single probe slot. */
  probe: boolean;
}

/** scheduler → main */
export type FromScheduler =
  | { type: "ready" }
  | ({ type: "grant"; id: number; index: number } & GrantDetail)
  | { type: "reject"; id: number; error: { code: ErrorCode; message: string; retryAfterS?: number }; drops: Record<string, number>; waitedMs: number };
