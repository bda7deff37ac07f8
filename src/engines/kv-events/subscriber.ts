/**
 * KvEventSubscriber: follows one engine's KV-event stream (a vLLM
 * ZmqEventPublisher, or anything speaking its protocol) and hands its
 * batches to a consumer in sequence order, exactly once, or tells it that
 * what it built from the stream must be dropped. The sockets reconnect by
 * themselves; gaps and reconnections are repaired through the replay socket
 * (SequenceTracker decides, ReplayClient asks).
 *
 * What it holds is bounded in bytes (a KvByteBudget, the endpoint's and the
 * gateway's): live batches waiting for a replay (see SequenceTracker), and
 * batches waiting to be handed over. Those are handed over in slices of a
 * few milliseconds, so a thread with many streams keeps answering; while
 * the backlog is above a mark the sockets stop reading (the publisher's own
 * high-water mark holds the rest), and should it still outgrow the budget it
 * is dropped and the consumer told to reset ("apply-overrun").
 */

import type { KvBatchDropBound } from "../../shared/kv-event-stats.ts";
import type { ZmtpCloseReason } from "../zmq/errors.ts";
import { SubSocket } from "../zmq/sub-socket.ts";
import { KvByteBudget } from "./byte-budget.ts";
import { decodeKvEventBatch } from "./decode.ts";
import type { KvEventBatch } from "./model.ts";
import { ReplayClient } from "./replay-client.ts";
import { type DeliverySource, type ResetReason, SequenceTracker } from "./sequence-tracker.ts";
import { parsePublished } from "./wire.ts";

export type { ResetReason } from "./sequence-tracker.ts";

/** Silence on the replay socket after which a replay counts as failed. */
const DEFAULT_REPLAY_TIMEOUT_MS = 2_000;
/** Live batches held while a replay is in flight before giving up on it. */
const DEFAULT_MAX_PENDING_LIVE_BATCHES = 10_000;
/** PING a silent publisher this often; libzmq answers PINGs whatever its own settings. */
const DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000;
/** Reconnect when nothing at all, PONGs included, came for this long. */
const DEFAULT_HEARTBEAT_TIMEOUT_MS = 15_000;
/** Bytes of batches one stream may hold (waiting for a replay, or to be handed over): a few seconds of a busy engine's events. */
export const DEFAULT_MAX_HELD_BYTES = 32 * 1024 * 1024;
/** Largest message taken from a publisher: a batch of a 128k-token prefill is under 1 MB; it must fit the held bytes. */
export const DEFAULT_MAX_KV_MESSAGE_BYTES = 16 * 1024 * 1024;
/** Hand batches over for at most this long before letting the thread's other work run. */
const HANDOVER_SLICE_MS = 5;
/** Stop reading the sockets while the backlog holds this share of the budget or more; read again below half of it. */
const PAUSE_SHARE = 4;

/** Where a stream's live batches come from: a SUB socket of its own (SubSocket), or one topic of the gateway's bound SUB (KvTopicListener). */
export interface KvLiveFeed {
  readonly connected: boolean;
  /** TCP connection attempts (or, on a bound socket, connections the stream has arrived on). */
  readonly dialAttempts: number;
  readonly lastHeardAtMs: number | undefined;
  setReading(reading: boolean): void;
  close(): void;
}

/** What a live feed reports; `connected` on every new connection the publisher's batches come over. */
export interface KvLiveFeedEvents {
  message(frames: Uint8Array[]): void;
  connected(): void;
  disconnected(reason: ZmtpCloseReason, detail: string): void;
}

export interface KvEventSubscriberOptions {
  /** The engine's PUB socket, `tcp://host:port`, to connect to; or `feed`. */
  endpoint?: string;
  /** A live feed other than a SUB socket of its own (the gateway's bound SUB, for one topic); `endpoint` and `topic` are then unused. */
  feed?: (events: KvLiveFeedEvents) => KvLiveFeed;
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
  /** The bytes this stream may hold; default DEFAULT_MAX_HELD_BYTES of its own (pass one drawing on a shared budget to bound several streams together). */
  budget?: KvByteBudget;
}

export interface BatchInfo {
  seq: number;
  source: DeliverySource;
  /** Events of types this decoder does not know, left out of the batch. */
  unknownEvents: number;
}

interface KvEventSubscriberHandlers {
  /** The next batch, in sequence order. */
  batch(batch: KvEventBatch, info: BatchInfo): void;
  /** Everything built from this stream so far must be dropped (batches may have been missed). */
  reset(reason: ResetReason): void;
  /** A batch that did not decode; counted and dropped (its sequence still counts as delivered). */
  invalidBatch?(seq: number, error: string): void;
  /** Received batches dropped rather than held, by the bound reached (a reset follows or came with them). */
  dropped?(bound: KvBatchDropBound, batches: number): void;
  connected?(): void;
  disconnected?(reason: ZmtpCloseReason, detail: string): void;
}

interface KvEventSubscriberStats {
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
  /** Batches received and not yet handed over, and their bytes. */
  backlogBatches: number;
  backlogBytes: number;
  /** Batches dropped rather than held, by the bound reached. */
  droppedBatches: Record<KvBatchDropBound, number>;
}

interface Held {
  seq: number;
  payload: Uint8Array;
  source: DeliverySource;
}

export class KvEventSubscriber {
  private readonly sub: KvLiveFeed;
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
  private readonly resets: Record<ResetReason, number> = {
    "publisher-restarted": 0,
    "replay-incomplete": 0,
    "replay-failed": 0,
    "replay-overrun": 0,
    "apply-overrun": 0,
    "no-replay-endpoint": 0,
  };
  private readonly dropped: Record<KvBatchDropBound, number> = { "endpoint-bytes": 0, "gateway-bytes": 0, batches: 0 };
  private readonly budget: KvByteBudget;
  /** Batches to hand over, oldest at `backlogHead`. */
  private backlog: Held[] = [];
  private backlogHead = 0;
  private backlogBytes = 0;
  private handover: ReturnType<typeof setTimeout> | undefined;
  private reading = true;

  /** Starts connecting at once; throws only on a malformed endpoint (or with neither an endpoint nor a feed). */
  constructor(
    private readonly options: KvEventSubscriberOptions,
    private readonly handlers: KvEventSubscriberHandlers,
  ) {
    const replayEndpoint = options.replayEndpoint;
    this.budget = options.budget ?? new KvByteBudget(DEFAULT_MAX_HELD_BYTES);
    this.tracker = new SequenceTracker(
      {
        deliver: (seq, payload, source) => this.hold(seq, payload, source),
        requestReplay: (id, fromSeq) => this.startReplay(replayEndpoint!, id, fromSeq),
        cancelReplay: (id) => this.cancelReplay(id),
        reset: (reason) => {
          // What waits to be handed over was built on the state being dropped.
          this.clearBacklog();
          this.resets[reason]++;
          this.call(() => handlers.reset(reason));
        },
        dropped: (bound, batches) => this.countDropped(bound, batches),
      },
      { replayAvailable: replayEndpoint !== undefined, maxPendingLive: options.maxPendingLiveBatches ?? DEFAULT_MAX_PENDING_LIVE_BATCHES, budget: this.budget },
    );
    const events: KvLiveFeedEvents = {
      message: (frames) => {
        const msg = parsePublished(frames);
        if (!msg.ok) {
          this.counts.invalidMessages++;
          return;
        }
        this.tracker.live(msg.seq, own(msg.payload));
      },
      connected: () => {
        this.call(() => handlers.connected?.());
        this.tracker.connected();
      },
      disconnected: (reason, detail) => this.call(() => handlers.disconnected?.(reason, detail)),
    };
    if (options.feed !== undefined) {
      this.sub = options.feed(events);
      return;
    }
    if (options.endpoint === undefined) throw new Error("KvEventSubscriber needs an endpoint or a feed");
    const hbInterval = options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS;
    this.sub = new SubSocket(
      options.endpoint,
      [options.topic ?? ""],
      {
        reconnectIntervalMs: options.reconnectIntervalMs,
        reconnectIntervalMaxMs: options.reconnectIntervalMaxMs,
        maxMessageBytes: options.maxMessageBytes ?? DEFAULT_MAX_KV_MESSAGE_BYTES,
        heartbeat: hbInterval > 0 ? { intervalMs: hbInterval, timeoutMs: options.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS } : undefined,
      },
      events,
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
      backlogBatches: this.backlog.length - this.backlogHead,
      backlogBytes: this.backlogBytes,
      droppedBatches: { ...this.dropped },
    };
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.sub.close();
    this.replay?.client.cancel();
    this.replay = undefined;
    this.tracker.abandonQuietly();
    this.clearBacklog();
  }

  /** A batch the tracker released, in order: held until handed over in a slice, or, past the budget, dropped with everything held. */
  private hold(seq: number, payload: Uint8Array, source: DeliverySource): void {
    if (this.closed) return;
    const refused = this.budget.take(payload.length);
    if (refused !== undefined) {
      const held = this.backlog.length - this.backlogHead;
      this.clearBacklog();
      const waiting = this.tracker.abandon("apply-overrun");
      this.countDropped(refused, held + waiting + 1);
      return;
    }
    this.backlog.push({ seq, payload, source });
    this.backlogBytes += payload.length;
    if (this.reading && this.backlogBytes >= this.budget.limitBytes / PAUSE_SHARE) this.setReading(false);
    this.handover ??= setTimeout(() => this.handOver(), 0);
  }

  /** Hand held batches over for one slice, then yield to the thread's other work if any are left. */
  private handOver(): void {
    this.handover = undefined;
    const until = performance.now() + HANDOVER_SLICE_MS;
    while (this.backlogHead < this.backlog.length && !this.closed) {
      const h = this.backlog[this.backlogHead]!;
      this.backlog[this.backlogHead++] = undefined as unknown as Held;
      this.backlogBytes -= h.payload.length;
      this.budget.give(h.payload.length);
      this.deliver(h.seq, h.payload, h.source);
      if (performance.now() >= until) break;
    }
    if (this.backlogHead >= this.backlog.length) {
      this.backlog = [];
      this.backlogHead = 0;
    } else if (this.backlogHead > 1024) {
      this.backlog = this.backlog.slice(this.backlogHead);
      this.backlogHead = 0;
    }
    if (!this.reading && this.backlogBytes < this.budget.limitBytes / (2 * PAUSE_SHARE)) this.setReading(true);
    if (this.backlogHead < this.backlog.length && !this.closed) this.handover ??= setTimeout(() => this.handOver(), 0);
  }

  private clearBacklog(): void {
    this.budget.give(this.backlogBytes);
    this.backlog = [];
    this.backlogHead = 0;
    this.backlogBytes = 0;
    if (this.handover !== undefined) clearTimeout(this.handover);
    this.handover = undefined;
    if (!this.reading && !this.closed) this.setReading(true);
  }

  private setReading(reading: boolean): void {
    this.reading = reading;
    this.sub.setReading(reading);
    this.replay?.client.setReading(reading);
  }

  private countDropped(bound: KvBatchDropBound, batches: number): void {
    this.dropped[bound] += batches;
    this.call(() => this.handlers.dropped?.(bound, batches));
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
      {
        endpoint,
        fromSeq,
        inactivityTimeoutMs: this.options.replayTimeoutMs ?? DEFAULT_REPLAY_TIMEOUT_MS,
        maxMessageBytes: this.options.maxMessageBytes ?? DEFAULT_MAX_KV_MESSAGE_BYTES,
      },
      {
        batch: (seq, payload) => this.tracker.replayBatch(id, seq, own(payload)),
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
    if (!this.reading) client.setReading(false);
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

/** The payload on its own: a view into the socket's larger read buffer would keep all of it alive while held, and the budget would count too little. */
function own(payload: Uint8Array): Uint8Array {
  return payload.byteOffset === 0 && payload.byteLength === payload.buffer.byteLength ? payload : payload.slice();
}
