/**
 * The KV-events worker's work (workers/kv-events.ts is its shell): one
 * KvEventSubscriber per endpoint whose engine publishes vLLM's KV-cache
 * events, their batches applied to the shared block index (kv-block-tracker.ts),
 * and each stream's state published for the scorers: SYNCING while its
 * history replays, LIVE while connected and heard from (heartbeat replies
 * count), STALE when disconnected or silent past stale_after_ms. A stream
 * the subscriber cannot keep whole (restart, lost replay) drops the
 * endpoint's index and says why, in the stats and to the main thread.
 *
 * What the streams may hold unapplied is bounded in bytes, per endpoint and
 * for all of them together (a publisher flooding its live socket while it
 * trickles a replay must not grow the gateway), and batches are applied in
 * slices so the timer that refreshes every stream's state keeps running. The
 * readers do not take the worker's word alone: each refresh stamps when a
 * stream was heard from and caught up, and a scorer treats one not stamped
 * within stale_after_ms as stale (KvEventStats.live), worker stalled or not.
 *
 * An engine whose publisher connects to the gateway (llm-d's topology) is
 * followed through the one SUB socket bound at kv_events.listen
 * (KvTopicListener), by its topic; it is bound on the first such endpoint,
 * and a bind that fails (address taken) is tried again every tick.
 *
 * It runs off the main thread because applying a batch costs: decoding and
 * indexing the 512 blocks an 8k-token prefill stores takes ~1.3 ms here, a
 * stall the request path would take at every long prefill of every engine.
 */

import { KvByteBudget } from "../engines/kv-events/byte-budget.ts";
import type { ResetReason } from "../engines/kv-events/subscriber.ts";
import { DEFAULT_MAX_HELD_BYTES, DEFAULT_MAX_KV_MESSAGE_BYTES, KvEventSubscriber, type KvEventSubscriberOptions } from "../engines/kv-events/subscriber.ts";
import { KvTopicListener } from "../engines/kv-events/topic-listener.ts";
import type { KvEventsSettings, KvEventsSource, StreamNote } from "../protocol/kv-events-messages.ts";
import type { KvBlockIndex } from "../scheduling/kv-block-index.ts";
import { KV_COUNTER, KV_STREAM, type KvEventStats, type KvStreamState } from "../shared/kv-event-stats.ts";
import { KvBlockTracker } from "./kv-block-tracker.ts";

/** How often stream states are re-derived (staleness is a matter of time, not of events). */
const MAX_TICK_MS = 1_000;
/** Bytes every stream together may hold unapplied (each one also has its own DEFAULT_MAX_HELD_BYTES). */
const DEFAULT_MAX_HELD_BYTES_TOTAL = 128 * 1024 * 1024;
/** At most one log line per endpoint and kind of trouble this often (a rogue publisher must not flood the log); the rest are counted in it. */
const NOTE_INTERVAL_MS = 10_000;

interface Followed {
  id: string;
  source: KvEventsSource;
  sub: KvEventSubscriber;
  replaysCounted: number;
}

export class KvEventsService {
  private readonly tracker: KvBlockTracker;
  private readonly followed = new Map<number, Followed>();
  private timer: ReturnType<typeof setInterval> | undefined;
  /** Per "slot/event": when it was last noted, and how many went unnoted since. */
  private readonly sparing = new Map<string, { at: number; held: number }>();
  private readonly heldBytes: KvByteBudget;
  private listener: KvTopicListener | undefined;
  /** Endpoints on the bound socket waiting for it to bind. */
  private readonly awaitingListener = new Map<number, { id: string; source: KvEventsSource }>();

  /** `limits`: the bytes one stream, and every stream together, may hold unapplied. */
  constructor(
    index: KvBlockIndex,
    private readonly stats: KvEventStats,
    private readonly settings: KvEventsSettings,
    private readonly note: (n: StreamNote) => void,
    private readonly limits: { heldBytesPerStream: number; heldBytesTotal: number } = {
      heldBytesPerStream: DEFAULT_MAX_HELD_BYTES,
      heldBytesTotal: DEFAULT_MAX_HELD_BYTES_TOTAL,
    },
  ) {
    this.heldBytes = new KvByteBudget(limits.heldBytesTotal);
    stats.setStaleAfterMs(settings.staleAfterMs);
    this.tracker = new KvBlockTracker(index, stats, (slot, reason, detail) => {
      const f = this.followed.get(slot);
      if (f) this.noteSparingly({ slot, id: f.id, event: "rejected-event", detail: `${reason}: ${detail}` });
    });
  }

  start(): void {
    this.timer ??= setInterval(
      () => {
        if (this.awaitingListener.size > 0 && this.bindListener() !== undefined) {
          const waiting = [...this.awaitingListener];
          this.awaitingListener.clear();
          for (const [slot, { id, source }] of waiting) this.follow(slot, id, source);
        }
        if (this.listener !== undefined) this.stats.setListen(this.listener.publishers, this.listener.refusedConnections);
        for (const slot of this.followed.keys()) this.refresh(slot);
      },
      Math.min(MAX_TICK_MS, Math.max(10, Math.floor(this.settings.staleAfterMs / 4))),
    );
  }

  /** Subscribe to an endpoint's events (again, if its source changed); what was indexed for the slot before is dropped. */
  follow(slot: number, id: string, source: KvEventsSource): void {
    const current = this.followed.get(slot);
    if (current && current.id === id && sameSource(current.source, source)) return;
    this.unfollow(slot);
    this.stats.reset(slot, KV_STREAM.STALE);
    let live: Pick<KvEventSubscriberOptions, "endpoint" | "topic" | "feed">;
    if (source.endpoint !== null) live = { endpoint: source.endpoint, topic: source.topic };
    else {
      const listener = this.bindListener();
      if (listener === undefined) {
        this.awaitingListener.set(slot, { id, source });
        return;
      }
      if (listener.has(source.topic)) {
        this.note({ slot, id, event: "topic-conflict", detail: `topic '${source.topic}' is another endpoint's: not followed` });
        return;
      }
      live = { feed: (events) => listener.attach(source.topic, events) };
    }
    const sub = new KvEventSubscriber(
      {
        ...live,
        ...(source.replayEndpoint !== null ? { replayEndpoint: source.replayEndpoint } : {}),
        replayTimeoutMs: this.settings.replayTimeoutMs,
        heartbeatIntervalMs: this.settings.heartbeatIntervalMs,
        heartbeatTimeoutMs: Math.max(this.settings.heartbeatIntervalMs * 3, this.settings.staleAfterMs),
        budget: new KvByteBudget(this.limits.heldBytesPerStream, this.heldBytes),
      },
      {
        batch: (batch) => {
          this.tracker.apply(slot, batch);
          this.refresh(slot);
        },
        reset: (reason: ResetReason) => {
          this.tracker.drop(slot, reason);
          this.note({ slot, id, event: "dropped", detail: reason });
        },
        dropped: (bound, batches) => {
          this.stats.addDroppedBatches(slot, bound, batches);
          this.noteSparingly({
            slot,
            id,
            event: "overrun",
            detail: `${batches} batches dropped unapplied (${bound} bound reached); the endpoint's index is rebuilt from what follows`,
          });
        },
        invalidBatch: (_seq, error) => {
          this.stats.add(slot, KV_COUNTER.INVALID);
          this.noteSparingly({ slot, id, event: "invalid-batch", detail: error });
        },
        connected: () => {
          this.note({ slot, id, event: "connected", detail: source.endpoint ?? `topic ${source.topic} on ${this.settings.listen}` });
          queueMicrotask(() => this.refresh(slot));
        },
        disconnected: (reason, detail) => {
          this.note({ slot, id, event: "disconnected", detail: `${reason}: ${detail}` });
          queueMicrotask(() => this.refresh(slot));
        },
      },
    );
    this.followed.set(slot, { id, source, sub, replaysCounted: 0 });
  }

  /** Stop following an endpoint and forget its index. */
  unfollow(slot: number): void {
    if (this.awaitingListener.delete(slot)) this.stats.reset(slot, KV_STREAM.NONE);
    const f = this.followed.get(slot);
    if (!f) return;
    f.sub.close();
    this.followed.delete(slot);
    this.tracker.forget(slot);
    this.stats.reset(slot, KV_STREAM.NONE);
    for (const key of this.sparing.keys()) if (key.startsWith(`${slot}/`)) this.sparing.delete(key);
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    for (const slot of [...this.followed.keys()]) this.unfollow(slot);
    this.awaitingListener.clear();
    this.listener?.close();
    this.listener = undefined;
  }

  /** The bound SUB socket, bound on first use; undefined when none is configured or the bind failed (noted; tried again on the next call). */
  private bindListener(): KvTopicListener | undefined {
    const listen = this.settings.listen;
    if (this.listener !== undefined || listen === null) return this.listener;
    try {
      const hb = this.settings.heartbeatIntervalMs;
      this.listener = new KvTopicListener(
        listen,
        {
          maxMessageBytes: DEFAULT_MAX_KV_MESSAGE_BYTES,
          maxPublishers: this.settings.listenMaxPublishers,
          heartbeat: hb > 0 ? { intervalMs: hb, timeoutMs: Math.max(hb * 3, this.settings.staleAfterMs) } : undefined,
        },
        { unrouted: (reason) => this.stats.addUnrouted(reason) },
      );
    } catch (err) {
      this.noteSparingly({
        slot: -1,
        id: "kv_events.listen",
        event: "listen-failed",
        detail: `${listen}: ${err instanceof Error ? err.message : String(err)}`,
      });
      return undefined;
    }
    this.stats.setListen(0, 0);
    this.note({ slot: -1, id: "kv_events.listen", event: "listening", detail: this.listener.endpoint });
    return this.listener;
  }

  /** A note of trouble a publisher can repeat at will: the first at once, then at most one per NOTE_INTERVAL_MS saying how many it stands for. */
  private noteSparingly(n: StreamNote): void {
    const key = `${n.slot}/${n.event}`;
    const now = Date.now();
    const last = this.sparing.get(key);
    if (last !== undefined && now - last.at < NOTE_INTERVAL_MS) {
      last.held++;
      return;
    }
    this.sparing.set(key, { at: now, held: 0 });
    this.note(
      last !== undefined && last.held > 0 ? { ...n, detail: `${n.detail} (and ${last.held} more in the last ${Math.round((now - last.at) / 1000)} s)` } : n,
    );
  }

  /** Re-derive a stream's state and publish its heartbeat time and replay count. */
  private refresh(slot: number): void {
    const f = this.followed.get(slot);
    if (!f) return;
    const st = f.sub.stats();
    this.stats.setLastHeardAt(slot, st.lastHeardAtMs);
    if (st.replayRequests > f.replaysCounted) {
      this.stats.add(slot, KV_COUNTER.REPLAYS, st.replayRequests - f.replaysCounted);
      f.replaysCounted = st.replayRequests;
    }
    const now = Date.now();
    if (st.backlogBatches === 0) this.stats.setCaughtUpAt(slot, now);
    const heard = st.lastHeardAtMs !== undefined && now - st.lastHeardAtMs <= this.settings.staleAfterMs;
    const caughtUp = now - this.stats.caughtUpAt(slot) <= this.settings.staleAfterMs;
    const state: KvStreamState = !st.connected || !heard || !caughtUp ? KV_STREAM.STALE : st.replaying ? KV_STREAM.SYNCING : KV_STREAM.LIVE;
    const before = this.stats.state(slot);
    if (state === before) return;
    this.stats.setState(slot, state);
    if (state === KV_STREAM.LIVE) this.note({ slot, id: f.id, event: "live", detail: `${this.tracker.blocksOf(slot)} blocks indexed` });
    else if (state === KV_STREAM.STALE && before === KV_STREAM.LIVE)
      this.note({
        slot,
        id: f.id,
        event: "stale",
        detail: !st.connected ? "disconnected" : !heard ? "silent" : `behind: ${st.backlogBatches} batches not yet applied`,
      });
  }
}

function sameSource(a: KvEventsSource, b: KvEventsSource): boolean {
  return a.endpoint === b.endpoint && a.replayEndpoint === b.replayEndpoint && a.topic === b.topic;
}
