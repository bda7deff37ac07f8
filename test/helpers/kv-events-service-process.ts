/**
 * A KV-events service alone in a process (the KV-events worker's work, on
 * this process's main thread), following the endpoints given as JSON in
 * argv[2], and saying every 100 ms on stdout, as a JSON line, how late its
 * timer ran (the loop's responsiveness), its resident memory, and what a
 * scorer would read for each slot.
 */
import { KvEventsService } from "../../src/polling/kv-events-service.ts";
import type { KvEventsSource } from "../../src/protocol/kv-events-messages.ts";
import { KvBlockIndex } from "../../src/scheduling/kv-block-index.ts";
import { KV_BATCH_DROP_BOUNDS, KV_INDEX_DROP_REASONS, KvEventStats } from "../../src/shared/kv-event-stats.ts";

interface Args {
  staleAfterMs: number;
  capacity: number;
  follow: { slot: number; id: string; source: KvEventsSource }[];
}

const args = JSON.parse(process.argv[2]!) as Args;
const stats = new KvEventStats(8);
const service = new KvEventsService(
  new KvBlockIndex(args.capacity, stats),
  stats,
  { listen: null, listenMaxPublishers: 1, staleAfterMs: args.staleAfterMs, replayTimeoutMs: 2_000, heartbeatIntervalMs: 1_000 },
  () => {},
);
service.start();
for (const f of args.follow) service.follow(f.slot, f.id, f.source);

const EVERY_MS = 100;
let last = performance.now();
setInterval(() => {
  const now = performance.now();
  const lagMs = Math.max(0, now - last - EVERY_MS);
  last = now;
  const slots = args.follow.map((f) => ({
    live: stats.live(f.slot),
    blocks: stats.blocks(f.slot),
    dropped: KV_BATCH_DROP_BOUNDS.reduce((n, b) => n + stats.droppedBatches(f.slot, b), 0),
    drops: Object.fromEntries(KV_INDEX_DROP_REASONS.map((r) => [r, stats.drops(f.slot, r)])),
  }));
  process.stdout.write(`${JSON.stringify({ at: Date.now(), lagMs: Math.round(lagMs), rss: process.memoryUsage.rss(), slots })}\n`);
}, EVERY_MS);
