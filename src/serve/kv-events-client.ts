/**
 * The main thread's side of the KV-events worker (workers/kv-events.ts): it
 * is started on the first endpoint whose engine publishes KV-cache events
 * (a gateway whose engines publish none never starts it), told which
 * endpoints to follow as they come and go, and turns its notes into log
 * lines. What it learns lands in shared memory (the KV-block index and the
 * per-endpoint stream stats), read by both choosers and the metrics.
 */
import type { KvEventsConfig } from "../config/kv-events-config.ts";
import type { FromKvEvents, KvEventsSource, StreamNote, ToKvEvents } from "../protocol/kv-events-messages.ts";
import type { KvBlockIndex } from "../scheduling/kv-block-index.ts";
import type { KvEventStats } from "../shared/kv-event-stats.ts";
import type { Logger } from "../shared/logger.ts";

const WORKER_URL = new URL("../../workers/kv-events.ts", import.meta.url);
const WARNINGS: ReadonlySet<StreamNote["event"]> = new Set([
  "dropped",
  "stale",
  "invalid-batch",
  "rejected-event",
  "overrun",
  "listen-failed",
  "topic-conflict",
]);

export class KvEventsClient {
  private worker: Worker | undefined;
  private readonly followed = new Set<number>();
  private stopped: Promise<void> | undefined;

  constructor(
    private readonly tables: { index: KvBlockIndex; stats: KvEventStats },
    private readonly config: KvEventsConfig,
    private readonly log: Logger,
  ) {}

  /** Some endpoint's events are followed (precise-prefix may have something to read). */
  get following(): boolean {
    return this.followed.size > 0;
  }

  /** Follow the events of the endpoint in `slot` (undefined: it publishes none, or left). */
  follow(slot: number, id: string, source: KvEventsSource | undefined): void {
    if (this.stopped) return;
    if (source === undefined) {
      if (this.followed.delete(slot)) this.post({ type: "unfollow", slot });
      return;
    }
    this.followed.add(slot);
    this.post({ type: "follow", slot, id, source: { ...source } });
  }

  /** Stop every subscription (bounded), then end the worker. */
  stop(timeoutMs = 1_000): Promise<void> {
    this.stopped ??= (async () => {
      const w = this.worker;
      if (!w) return;
      const done = new Promise<void>((resolve) => w.addEventListener("message", (e: MessageEvent<FromKvEvents>) => e.data.type === "ready" && resolve()));
      w.postMessage({ type: "stop" } satisfies ToKvEvents);
      await Promise.race([done, Bun.sleep(timeoutMs)]);
      w.terminate();
    })();
    return this.stopped;
  }

  private post(msg: ToKvEvents): void {
    this.start().postMessage(msg);
  }

  /** The worker, started (and initialised) on first use; messages posted before it loads wait in order. */
  private start(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(WORKER_URL.href);
    w.onmessage = (event: MessageEvent<FromKvEvents>) => {
      const msg = event.data;
      switch (msg.type) {
        case "ready":
          return;
        case "note": {
          const fields = { endpoint: msg.id, event: msg.event, detail: msg.detail };
          if (WARNINGS.has(msg.event)) this.log.warn(fields, "kv events");
          else this.log.info(fields, "kv events");
          return;
        }
        default: {
          const unreachable: never = msg;
          this.log.error({ msg: unreachable }, "unknown kv-events message");
        }
      }
    };
    const c = this.config;
    w.postMessage({
      type: "init",
      index: this.tables.index.buffer,
      capacity: this.tables.index.capacity,
      stats: this.tables.stats.buffer,
      slots: this.tables.stats.slots,
      settings: {
        listen: c.listen,
        listenMaxPublishers: c.listenMaxPublishers,
        staleAfterMs: c.staleAfterMs,
        replayTimeoutMs: c.replayTimeoutMs,
        heartbeatIntervalMs: c.heartbeatIntervalMs,
      },
    } satisfies ToKvEvents);
    this.worker = w;
    return w;
  }
}
