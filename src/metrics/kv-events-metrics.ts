/**
 * The KV-events series: per endpoint that publishes KV-cache events, what
 * the KV-events worker counted (events, replays, drops, evictions) and the
 * block index holds, read from shared memory when Prometheus scrapes; and
 * the request path's tokenization (counted on the main thread). Endpoints
 * that publish nothing have no series (absent is not zero).
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import {
  KV_BATCH_DROP_BOUNDS,
  KV_COUNTER,
  KV_EVENT_REJECT_REASONS,
  KV_INDEX_DROP_REASONS,
  KV_STREAM,
  KV_STREAM_NAMES,
  KV_UNROUTED_REASONS,
  type KvEventStats,
} from "../shared/kv-event-stats.ts";
import { KV, KV_EVENT_TYPES, TOKENIZE_RESULTS, TOKENIZE_SKIPS, type TokenizeResult, type TokenizeSkip } from "./names.ts";

/** Round trips to a tokenizer: a sim answers in well under a millisecond, vLLM in a few for long prompts. */
const TOKENIZE_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1];

export interface KvEventsMetrics {
  tokenized(result: TokenizeResult): void;
  skipped(reason: TokenizeSkip): void;
  tokenizeSeconds(outcome: "ok" | "error", seconds: number): void;
}

export function registerKvEventsMetrics(
  registry: Registry,
  stats: KvEventStats,
  endpoints: () => Iterable<{ index: number; id: string }>,
  now: () => number = Date.now,
): KvEventsMetrics {
  const registers = [registry];
  /** The live endpoints whose stream is followed (state other than none). */
  const followed = () => [...endpoints()].filter((e) => stats.state(e.index) !== KV_STREAM.NONE);
  const perEndpoint = <L extends string>(
    kind: "counter" | "gauge",
    d: { name: string; help: string; labels: readonly L[] },
    fill: (set: (labels: Partial<Record<L, string>>, v: number) => void) => void,
  ) => {
    const opts = { name: d.name, help: d.help, labelNames: d.labels, registers };
    if (kind === "counter") {
      new Counter<L>({
        ...opts,
        collect() {
          this.reset();
          fill((labels, v) => this.inc(labels, v));
        },
      });
    } else {
      new Gauge<L>({
        ...opts,
        collect() {
          this.reset();
          fill((labels, v) => this.set(labels, v));
        },
      });
    }
  };
  const counters: Record<(typeof KV_EVENT_TYPES)[number], number> = {
    block_stored: KV_COUNTER.BLOCK_STORED,
    block_removed: KV_COUNTER.BLOCK_REMOVED,
    all_blocks_cleared: KV_COUNTER.ALL_BLOCKS_CLEARED,
  };
  perEndpoint("counter", KV.events, (set) => {
    for (const e of followed()) for (const event of KV_EVENT_TYPES) set({ endpoint: e.id, event }, stats.counter(e.index, counters[event]));
  });
  perEndpoint("gauge", KV.indexBlocks, (set) => {
    for (const e of followed()) set({ endpoint: e.id }, stats.blocks(e.index));
  });
  perEndpoint("gauge", KV.streamLive, (set) => {
    for (const e of followed()) {
      const state = stats.state(e.index);
      for (let s = KV_STREAM.SYNCING; s <= KV_STREAM.STALE; s++) set({ endpoint: e.id, state: KV_STREAM_NAMES[s] }, state === s ? 1 : 0);
    }
  });
  perEndpoint("gauge", KV.staleness, (set) => {
    const t = now();
    for (const e of followed()) {
      const heard = stats.lastHeardAt(e.index);
      if (!Number.isNaN(heard)) set({ endpoint: e.id }, Math.max(0, (t - heard) / 1000));
    }
  });
  const simple = (d: { name: string; help: string; labels: readonly ["endpoint"] }, field: number) =>
    perEndpoint("counter", d, (set) => {
      for (const e of followed()) set({ endpoint: e.id }, stats.counter(e.index, field));
    });
  simple(KV.replays, KV_COUNTER.REPLAYS);
  simple(KV.evicted, KV_COUNTER.EVICTED);
  simple(KV.skipped, KV_COUNTER.SKIPPED);
  simple(KV.invalid, KV_COUNTER.INVALID);
  perEndpoint("counter", KV.drops, (set) => {
    for (const e of followed()) for (const reason of KV_INDEX_DROP_REASONS) set({ endpoint: e.id, reason }, stats.drops(e.index, reason));
  });
  perEndpoint("counter", KV.rejected, (set) => {
    for (const e of followed()) for (const reason of KV_EVENT_REJECT_REASONS) set({ endpoint: e.id, reason }, stats.rejected(e.index, reason));
  });
  perEndpoint("counter", KV.droppedBatches, (set) => {
    for (const e of followed()) for (const bound of KV_BATCH_DROP_BOUNDS) set({ endpoint: e.id, bound }, stats.droppedBatches(e.index, bound));
  });
  // The bound SUB socket's series exist only while it is bound (absent is not zero).
  const bound = () => !Number.isNaN(stats.listenPublishers);
  new Gauge({
    name: KV.listenPublishers.name,
    help: KV.listenPublishers.help,
    registers,
    collect() {
      this.reset();
      if (bound()) this.set(stats.listenPublishers);
    },
  });
  new Counter({
    name: KV.listenRefused.name,
    help: KV.listenRefused.help,
    registers,
    collect() {
      this.reset();
      if (bound()) this.inc(stats.listenRefused);
    },
  });
  new Counter({
    name: KV.unrouted.name,
    help: KV.unrouted.help,
    labelNames: KV.unrouted.labels,
    registers,
    collect() {
      this.reset();
      if (bound()) for (const reason of KV_UNROUTED_REASONS) this.inc({ reason }, stats.unrouted(reason));
    },
  });

  const tokenize = new Counter({ name: KV.tokenize.name, help: KV.tokenize.help, labelNames: KV.tokenize.labels, registers });
  const skipped = new Counter({ name: KV.tokenizeSkipped.name, help: KV.tokenizeSkipped.help, labelNames: KV.tokenizeSkipped.labels, registers });
  const seconds = new Histogram({
    name: KV.tokenizeSeconds.name,
    help: KV.tokenizeSeconds.help,
    labelNames: KV.tokenizeSeconds.labels,
    buckets: TOKENIZE_BUCKETS,
    registers,
  });
  // Every result and reason from the start, so a rate over them is defined before the first request.
  for (const result of TOKENIZE_RESULTS) tokenize.inc({ result }, 0);
  for (const reason of TOKENIZE_SKIPS) skipped.inc({ reason }, 0);
  const tokenized = TOKENIZE_RESULTS.map((result) => tokenize.labels({ result }));
  const skips = TOKENIZE_SKIPS.map((reason) => skipped.labels({ reason }));
  return {
    tokenized: (result) => tokenized[TOKENIZE_RESULTS.indexOf(result)]!.inc(),
    skipped: (reason) => skips[TOKENIZE_SKIPS.indexOf(reason)]!.inc(),
    tokenizeSeconds: (outcome, s) => seconds.observe({ outcome }, s),
  };
}
