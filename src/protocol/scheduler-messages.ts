/** Typed messages between the main thread and the scheduler worker (workers/scheduler.ts). */
import type { Config } from "../config/types.ts";
import type { ErrorCode } from "../shared/errors.ts";

export interface EndpointDescriptor {
  /** Slot in the shared endpoint table. */
  index: number;
  id: string;
  /** Row of the endpoint's pool in the shared pool table. */
  pool: number;
  poolName: string;
  /** Configured models, or [] until discovery reports them. */
  models: string[];
}

/** main → scheduler */
export type ToScheduler =
  | {
      type: "init";
      endpoints: SharedArrayBuffer;
      pools: SharedArrayBuffer;
      stats: SharedArrayBuffer;
      signals: SharedArrayBuffer;
      prefixIndex: SharedArrayBuffer;
      /** The KV-block index (engines' KV-cache events) and its per-endpoint stream states; `kvIndexCapacity` its entries. */
      kvIndex: SharedArrayBuffer;
      kvIndexCapacity: number;
      kvStats: SharedArrayBuffer;
      /** LoRA adapters per endpoint (src/shared/lora-table.ts). */
      lora?: SharedArrayBuffer;
      /** Several gateways: this gateway's share of each pool (src/shared/pool-shares.ts); absent: 1. */
      shares?: SharedArrayBuffer;
      /** Capacity of the endpoint and pool tables. */
      maxEndpoints: number;
      maxPools: number;
      directory: EndpointDescriptor[];
      scheduling: Config["scheduling"];
      admission: Config["admission"];
      staleAfterMs: number;
    }
  /** An endpoint took a slot (descriptor) or left it (null). */
  | { type: "endpoint"; index: number; descriptor: EndpointDescriptor | null }
  | { type: "models"; index: number; models: string[] }
  /** A configuration reload changed the scheduling profile's filters, scorers or picker (never what it reads: that needs a restart). */
  | { type: "scheduling"; scheduling: Config["scheduling"] }
  /** A request the main thread could not admit by itself: admission (may queue), then scoring. */
  | {
      type: "admit";
      id: number;
      model: string;
      pool: number;
      band: number;
      tenant: string;
      estTokens: number;
      prefixHashes: readonly number[];
      tokenBlockKeys?: readonly number[];
      promptTokens?: number;
      adapter?: number;
    }
  /** The client left while its request was queued. */
  | { type: "cancel"; id: number }
  /** A request let go of a pool something waits for: queues may move. */
  | { type: "release" };

/** The chosen endpoint's per-scorer scores and per-filter drops travel back for the metrics. */
export interface GrantDetail {
  scores: Record<string, number>;
  drops: Record<string, number>;
  /** Endpoints the scorers ranked (left after the filters). */
  candidates: number;
  /** Time spent in the admission queue, ms (0 when it flowed at once). */
  waitedMs: number;
  /** The circuit field (endpoint table) whose single half-open probe slot this grant took, or -1. */
  probe: number;
  /** The circuit field of the request's model on the endpoint, or -1 (the endpoint's own stands for it). */
  circuit: number;
  /** Uncached prompt tokens the claim added to the endpoint's prefill load (endpoint table PREFILL_TOKENS), taken off at the first token or the release. */
  prefillTokens: number;
}

/** scheduler → main */
export type FromScheduler =
  | { type: "ready" }
  | ({ type: "grant"; id: number; index: number; pool: number; band: number } & GrantDetail)
  | { type: "reject"; id: number; error: { code: ErrorCode; message: string; retryAfterS?: number }; drops: Record<string, number>; waitedMs: number };
