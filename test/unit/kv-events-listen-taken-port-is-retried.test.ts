/**
 * The KV-events worker's bound SUB socket when its port is taken at start:
 * the failure is noted (not thrown: the worker keeps serving the streams it
 * connects to), the bind is tried again every tick, and once the port is
 * free the waiting endpoints are followed and a publisher that connects
 * there is heard, counted in the shared stats.
 */
import { afterEach, expect, test } from "bun:test";
import { blockStored } from "../../src/engines/kv-events/model.ts";
import { KvEventPublisher } from "../../src/engines/kv-events/publisher.ts";
import { KvEventsService } from "../../src/polling/kv-events-service.ts";
import type { StreamNote } from "../../src/protocol/kv-events-messages.ts";
import { KvBlockIndex } from "../../src/scheduling/kv-block-index.ts";
import { KV_STREAM, KvEventStats } from "../../src/shared/kv-event-stats.ts";
import { waitUntil } from "../helpers/processes.ts";

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

test("a taken listen port is noted and retried; once free, the endpoint's engine connects and is followed", async () => {
  const squatter = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = squatter.port;
  let squatting = true;
  cleanups.push(() => squatting && squatter.stop(true));

  const stats = new KvEventStats(4);
  const notes: StreamNote[] = [];
  const service = new KvEventsService(
    new KvBlockIndex(4096, stats),
    stats,
    { listen: `tcp://127.0.0.1:${port}`, listenMaxPublishers: 4, staleAfterMs: 400, replayTimeoutMs: 1_000, heartbeatIntervalMs: 100 },
    (n) => notes.push(n),
  );
  service.start();
  cleanups.push(() => service.stop());
  service.follow(1, "a", { endpoint: null, replayEndpoint: null, topic: "kv@a@m" });

  expect(notes.map((n) => n.event)).toEqual(["listen-failed"]);
  expect(notes[0]!.detail).toContain(`tcp://127.0.0.1:${port}`);
  expect(stats.state(1)).toBe(KV_STREAM.STALE);
  expect(Number.isNaN(stats.listenPublishers)).toBe(true);

  squatter.stop(true);
  squatting = false;
  await waitUntil(() => notes.some((n) => n.event === "listening"), { what: "bound on a later tick" });

  const pub = new KvEventPublisher({ endpoint: `tcp://127.0.0.1:${port}`, connect: true, topic: "kv@a@m" });
  cleanups.push(() => pub.close());
  await waitUntil(
    () => {
      pub.publish([blockStored({ blockHashes: [1n], parentBlockHash: null, tokenIds: Array.from({ length: 16 }, (_, i) => i), blockSize: 16 })]);
      return stats.state(1) === KV_STREAM.LIVE && stats.blocks(1) > 0;
    },
    { what: "the engine's stream live and indexed", intervalMs: 50 },
  );
  await waitUntil(() => stats.listenPublishers === 1, { what: "the publisher counted" });
  expect(notes.filter((n) => n.event === "connected").map((n) => n.detail)).toEqual([`topic kv@a@m on tcp://127.0.0.1:${port}`]);
});
