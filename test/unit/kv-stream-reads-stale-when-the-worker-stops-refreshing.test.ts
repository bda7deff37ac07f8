/** A scorer judges a KV-event stream's staleness on its own clock: the worker saying LIVE is not enough once it stopped stamping the stream as heard from and caught up (stalled, or behind a backlog). */
import { expect, test } from "bun:test";
import { KV_STREAM, KvEventStats } from "../../src/shared/kv-event-stats.ts";

test("LIVE reads as live only while heard from and caught up within stale_after_ms, on the reader's clock", () => {
  let now = 1_000_000;
  const worker = new KvEventStats(4);
  const reader = new KvEventStats(4, worker.buffer, () => now);
  worker.setState(0, KV_STREAM.LIVE);
  // Before the worker says how long is too long, its word stands.
  expect(reader.live(0)).toBe(true);
  worker.setStaleAfterMs(3_000);
  worker.setLastHeardAt(0, now);
  worker.setCaughtUpAt(0, now);
  expect(reader.live(0)).toBe(true);
  now += 3_000;
  expect(reader.live(0)).toBe(true);
  // The worker stops refreshing (a stalled loop): still LIVE in its last word, stale to the reader.
  now += 1;
  expect(worker.state(0)).toBe(KV_STREAM.LIVE);
  expect(reader.live(0)).toBe(false);
  // Heard from, but behind: batches received and not applied for too long.
  worker.setLastHeardAt(0, now);
  expect(reader.live(0)).toBe(false);
  worker.setCaughtUpAt(0, now);
  expect(reader.live(0)).toBe(true);
  // Another state is never live, however fresh.
  worker.setState(0, KV_STREAM.SYNCING);
  expect(reader.live(0)).toBe(false);
  expect(reader.live(1)).toBe(false);
});
