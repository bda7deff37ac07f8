/**
 * KvEventSubscriber: follows one engine's KV-event stream (a vLLM
 * ZmqEventPublisher, or anything speaking its protocol) and hands its
 * batches to a consumer in sequence order, exactly once, or tells it that
 * what it built from the stream must be dropped. The sockets reconnect by
 * themselves; gaps and reconnections are repaired through the replay socket
 * (SequenceTracker decides, ReplayClient asks).
 */
import type { ZmtpCloseReason } from "../zmq/errors.ts";
import { SubSocket } from "../zmq/sub-socket.ts";
import { decodeKvEventBatch } from "./decode.ts";
import type { KvEventBatch } from "./model.ts";
import { ReplayClient } from "./replay-client.ts";
import { type DeliverySource, type ResetReason, SequenceTracker } from "./sequence-tracker.ts";
import { parsePublished } from "./wire.ts";

export type { DeliverySource, ResetReason } from "./sequence-tracker.ts";

/** Silence on the replay socket after which a replay counts as failed. */
export const DEFAULT_REPLAY_TIMEOUT_MS = 2_000;
/** Live batches held while a replay is in flight before giving up on it. */
export const DEFAULT_MAX_PENDING_LIVE_BATCHES = 10_000;
/** PING a silent publisher this often; libzmq answers PINGs whatever its own settings. */
export const DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000;
/** Reconnect when nothing at all, PONGs included, came for this long. */
export const DEFAULT_HEARTBEAT_TIMEOUT_MS = 15_000;

export interface KvEventSubscriberOptions {
  /** The engine's PUB socket: `tcp://host:port`. */
  endpoint: string;
  /** Its replay ROUTER; without one, every gap or reconnection means a reset. */
  replayEndpoint?: string;
  /** Topic prefix to subscribe to; default "" (everything). */
  topic?: string;
  replayTimeoutMs?: number;
  maxPendingLiveBatches?: number;
  /** 0 turns heartbeats off. */
  heartbeatIntervalMs?: number;
  heartbeatTimeoutMs?: number;
  reconnectIntervalMs?: number;
  reconnectIntervalMaxMs?: number;
  /** Largest message accepted from the publisher (a batch of a long prompt's blocks is a few hundred KB). */
  maxMessageBytes?: number;
}

export interface BatchInfo {
  seq: number;
  source: DeliverySource;
  /** Events of types this decoder does not know, left out of the batch. */
  unknownEvents: number;
}

export interface KvEventSubscriberHandlers {
  /** The next batch, in sequence order. */
  batch(batch: KvEventBatch, info: BatchInfo): void;
  /** Everything built from this stream so far must be dropped (batches may have been missed). */
  reset(reason: ResetReason): void;
  /** A batch that did not decode; counted and dropped (its sequence still counts as delivered). */
  invalidBatch?(seq: number, error: string): void;
  connected?(): void;
  disconnected?(reason: ZmtpCloseReason, detail: string): void;
}

export interface KvEventSubscriberStats {
  connected: boolean;
  /** A replay is in flight: batches before the live ones are still arriving (on every connection, the publisher's whole buffer at first). */
  replaying: boolean;
  /** TCP connection attempts to the PUB socket. */
  dialAttempts: number;
  /** Last sequence delivered since the last reset. */
  lastSequence: number | undefined;
  /** When the last batch was delivered (ms since the epoch). */
  lastBatchAtMs: number | undefined;
  /** When the publisher last sent anything, heartbeats included; undefined while disconnected. */
  lastHeardAtMs: number | undefined;
  liveBatches: number;
  replayedBatches: number;
  invalidBatches: number;
  /** Messages that were not `[topic, 8-byte seq, payload]`. */
  invalidMessages: number;
  unknownEvents: number;
  replayRequests: number;
  replayFailures: number;
  resets: Record<ResetReason, number>;
  /** Exceptions thrown by the handlers (caught so that one bad batch cannot stop the stream). */
  handlerErrors: number;
}

export class KvEventSubscriber {
  private readonly sub: SubSocket;
  private readonly tracker: SequenceTracker;
  private replay: { id: number; client: ReplayClient } | undefined;
  private closed = false;
  private lastBatchAt: number | undefined;
  private readonly counts = {
    liveBatches: 0,
    replayedBatches: 0,
    invalidBatches: 0,
    invalidMessages: 0,
    unknownEvents: 0,
    replayRequests: 0,
    replayFailures: 0,
    handlerErrors: 0,
  };
  private readonly resets: Record<ResetReason, number> = { "publisher-restarted": 0, "replay-incomplete": 0, "replay-failed": 0, "replay-overrun": 0, "no-replay-endpoint": 0 };

  /** Starts connecting at once; throws only on a malformed endpoint. */
  constructor(
    private readonly options: KvEventSubscriberOptions,
    private readonly handlers: KvEventSubscriberHandlers,
  ) {
    const replayEndpoint = options.replayEndpoint;
    this.tracker = new SequenceTracker(
      {
        deliver: (seq, payload, source) => this.deliver(seq, payload, source),
        requestReplay: (id, fromSeq) => this.startReplay(replayEndpoint!, id, fromSeq),
        cancelReplay: (id) => this.cancelReplay(id),
        reset: (reason) => {
          this.resets[reason]++;
          this.call(() => handlers.reset(reason));
        },
      },
      { replayAvailable: replayEndpoint !== undefined, maxPendingLive: options.maxPendingLiveBatches ?? DEFAULT_MAX_PENDING_LIVE_BATCHES },
    );
    const hbInterval = options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS;
    this.sub = new SubSocket(
      options.endpoint,
      [options.topic ?? ""],
      {
        reconnectIntervalMs: options.reconnectIntervalMs,
        reconnectIntervalMaxMs: options.reconnectIntervalMaxMs,
        maxMessageBytes: options.maxMessageBytes,
        heartbeat: hbInterval > 0 ? { intervalMs: hbInterval, timeoutMs: options.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS } : undefined,
      },
      {
        message: (frames) => {
          const msg = parsePublished(frames);
          if (!msg.ok) {
            this.counts.invalidMessages++;
            return;
          }
          this.tracker.live(msg.seq, msg.payload);
        },
        connected: () => {
          this.call(() => handlers.connected?.());
          this.tracker.connected();
        },
        disconnected: (reason, detail) => this.call(() => handlers.disconnected?.(reason, detail)),
      },
    );
  }

  stats(): KvEventSubscriberStats {
    return {
      connected: this.sub.connected,
      replaying: this.tracker.replaying,
      dialAttempts: this.sub.dialAttempts,
      lastSequence: this.tracker.lastSequence,
      lastBatchAtMs: this.lastBatchAt,
      lastHeardAtMs: this.sub.lastHeardAtMs,
      ...this.counts,
      resets: { ...this.resets },
    };
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.sub.close();
    this.replay?.client.cancel();
    this.replay = undefined;
  }

  private deliver(seq: number, payload: Uint8Array, source: DeliverySource): void {
    this.lastBatchAt = Date.now();
    if (source === "live") this.counts.liveBatches++;
    else this.counts.replayedBatches++;
    const decoded = decodeKvEventBatch(payload);
    if (!decoded.ok) {
      this.counts.invalidBatches++;
      this.call(() => this.handlers.invalidBatch?.(seq, decoded.error));
      return;
    }
    this.counts.unknownEvents += decoded.unknownEvents;
    this.call(() => this.handlers.batch(decoded.batch, { seq, source, unknownEvents: decoded.unknownEvents }));
  }

  private startReplay(endpoint: string, id: number, fromSeq: number): void {
    if (this.closed) return;
    this.counts.replayRequests++;
    const client = new ReplayClient(
      { endpoint, fromSeq, inactivityTimeoutMs: this.options.replayTimeoutMs ?? DEFAULT_REPLAY_TIMEOUT_MS, maxMessageBytes: this.options.maxMessageBytes },
      {
        batch: (seq, payload) => this.tracker.replayBatch(id, seq, payload),
        end: () => {
          if (this.replay?.id === id) this.replay = undefined;
          this.tracker.replayEnd(id);
        },
        failed: () => {
          if (this.replay?.id === id) this.replay = undefined;
          this.counts.replayFailures++;
          this.tracker.replayFailed(id);
        },
      },
    );
    this.replay = { id, client };
  }

  private cancelReplay(id: number): void {
    if (this.replay?.id !== id) return;
    this.replay.client.cancel();
    this.replay = undefined;
  }

  private call(fn: () => void): void {
    try {
      fn();
    } catch {
      this.counts.handlerErrors++;
    }
  }
}
