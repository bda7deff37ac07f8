/** Where an engine publishes vLLM's KV-cache events, and the typed messages between the main thread and the KV-events worker (workers/kv-events.ts). */
import type { KvEventsSource } from "../config/kv-events-config.ts";

export type { KvEventsSource };

/** How the worker follows streams (from the config's kv_events block). */
export interface KvEventsSettings {
  /** The SUB socket to bind for publishers that connect (kv_events.listen); null: none. */
  listen: string | null;
  listenMaxPublishers: number;
  staleAfterMs: number;
  replayTimeoutMs: number;
  heartbeatIntervalMs: number;
}

/** Something worth a log line about one endpoint's stream (or, with slot -1, the bound SUB socket: listening, listen-failed). */
export interface StreamNote {
  slot: number;
  id: string;
  event:
    | "connected"
    | "disconnected"
    | "live"
    | "stale"
    | "dropped"
    | "invalid-batch"
    | "rejected-event"
    | "overrun"
    | "listening"
    | "listen-failed"
    | "topic-conflict";
  detail: string;
}

/** main → KV-events worker */
export type ToKvEvents =
  | {
      type: "init";
      /** The KvBlockIndex and its capacity in entries. */
      index: SharedArrayBuffer;
      capacity: number;
      /** The KvEventStats and its slots (the endpoint table's). */
      stats: SharedArrayBuffer;
      slots: number;
      settings: KvEventsSettings;
    }
  /** Follow the events of the endpoint in a slot (replacing whatever it followed there). */
  | { type: "follow"; slot: number; id: string; source: KvEventsSource }
  /** The slot's endpoint left, or publishes no more: stop and forget its index. */
  | { type: "unfollow"; slot: number }
  | { type: "stop" };

/** KV-events worker → main */
export type FromKvEvents = { type: "ready" } | ({ type: "note" } & StreamNote);
