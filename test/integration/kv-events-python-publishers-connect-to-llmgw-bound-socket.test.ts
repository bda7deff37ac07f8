/**
 * Interop in llm-d's topology, with Debian's libzmq on both sides
 * (python3-zmq, python3-msgpack; scripts in test/helpers/kv-events-python/):
 *
 * - libzmq → llmgw: vLLM-shaped publishers whose PUB *connects* (as vLLM's
 *   does for an endpoint that names a host) to llmgw's bound SUB socket
 *   (KvTopicListener); each topic's batches reach its own stream, history
 *   through each publisher's own replay ROUTER, libzmq answers the bound
 *   side's PINGs, a topic nobody follows is counted and dropped, and a
 *   publisher that dies and comes back is seen to have restarted.
 * - llmgw → libzmq: a sim-engine given a host endpoint in
 *   --kv-events-config connects its publisher to a SUB that binds, as
 *   llm-d's KV-cache indexer does, which splits the topic and decodes the
 *   batches.
 */
import { afterEach, describe, expect } from "bun:test";
import { join } from "node:path";
import { blockStored, type KvCacheEvent } from "../../src/engines/kv-events/model.ts";
import { DEFAULT_MAX_KV_MESSAGE_BYTES, KvEventSubscriber, type ResetReason } from "../../src/engines/kv-events/subscriber.ts";
import { KvTopicListener } from "../../src/engines/kv-events/topic-listener.ts";
import type { KvUnroutedReason } from "../../src/shared/kv-event-stats.ts";
import { startSim } from "../helpers/cluster.ts";
import { JsonLinesProcess } from "../helpers/json-lines-process.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { testWithSystemPython } from "../helpers/system-tools.ts";

const PUBLISHER = join(import.meta.dir, "..", "helpers", "kv-events-python", "publisher.py");
const BOUND_SUBSCRIBER = join(import.meta.dir, "..", "helpers", "kv-events-python", "bound-subscriber.py");
const PACKAGES = { zmq: "python3-zmq", msgpack: "python3-msgpack" };

const children: JsonLinesProcess[] = [];
const closers: Array<{ close(): void }> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) c.close();
  await Promise.all(children.splice(0).map((c) => c.kill()));
  await stopAll();
});

/** The events publisher.py puts in batch k, in current vLLM's layout with int hashes (see its event_batch). */
function expectedEvents(k: number): KvCacheEvent[] {
  const hash = (i: number) => 2n ** 63n + BigInt(i) * 7919n;
  const events: KvCacheEvent[] = [
    blockStored({
      blockHashes: [hash(k)],
      parentBlockHash: k > 0 ? hash(k - 1) : null,
      tokenIds: Array.from({ length: 16 }, (_, i) => k * 16 + i),
      blockSize: 16,
      groupIdx: 0,
      kvCacheSpecKind: "full_attention",
    }),
  ];
  if (k % 4 === 3) events.push({ type: "BlockRemoved", blockHashes: [hash(k - 3)], medium: "GPU", groupIdx: 0 });
  return events;
}

/** publisher.py with its PUB connecting to `endpoint`, its replay ROUTER bound on `replayPort` (0: a free one). */
async function connectingPublisher(python: string, endpoint: string, topic: string, preload: number, replayPort = 0) {
  const proc = new JsonLinesProcess([python, PUBLISHER, `connect:${endpoint}`, String(replayPort), topic, "map", "topic", "int", String(preload)]);
  children.push(proc);
  const hello = await proc.line((l) => "replay" in l);
  let answers = 1;
  const command = async (line: string): Promise<void> => {
    proc.send(line);
    await proc.line(() => true, 15_000, answers++);
  };
  return { proc, replayPort: hello.replay as number, command };
}

function follow(listener: KvTopicListener, topic: string, replayPort: number) {
  const seen: Array<{ seq: number; source: string; events: KvCacheEvent[]; rank: number | null }> = [];
  const resets: ResetReason[] = [];
  const sub = new KvEventSubscriber(
    { feed: (events) => listener.attach(topic, events), replayEndpoint: `tcp://127.0.0.1:${replayPort}` },
    {
      batch: (b, info) => seen.push({ seq: info.seq, source: info.source, events: b.events, rank: b.dataParallelRank }),
      reset: (r) => resets.push(r),
    },
  );
  closers.push(sub);
  return { sub, seen, resets };
}

describe("llm-d's topology with libzmq on both sides", () => {
  testWithSystemPython(
    PACKAGES,
    "libzmq publishers connect to llmgw's bound SUB socket: each topic to its stream, history by replay, strangers counted, restarts seen",
    async (python) => {
      const unrouted: KvUnroutedReason[] = [];
      const listener = new KvTopicListener(
        "tcp://127.0.0.1:0",
        { maxMessageBytes: DEFAULT_MAX_KV_MESSAGE_BYTES, maxPublishers: 8, heartbeat: { intervalMs: 100, timeoutMs: 500 } },
        { unrouted: (r) => unrouted.push(r) },
      );
      closers.push(listener);
      const endpoint = listener.endpoint;
      // Node 1 has three batches of history, published before it connected: only its replay socket has them.
      const [one, two, stranger] = await Promise.all([
        connectingPublisher(python, endpoint, "kv@node-1@model", 3),
        connectingPublisher(python, endpoint, "kv@node-2@model", 0),
        connectingPublisher(python, endpoint, "kv@node-9@model", 0),
      ]);
      const f1 = follow(listener, "kv@node-1@model", one.replayPort);
      const f2 = follow(listener, "kv@node-2@model", two.replayPort);
      await waitUntil(() => listener.publishers === 3, { what: "three libzmq publishers connected" });

      // Until the SUB's subscription reaches a libzmq PUB it filters everything out: publish until the first arrive.
      await waitUntil(
        async () => {
          await Promise.all([one.command("publish 1"), two.command("publish 1"), stranger.command("publish 1")]);
          return f1.seen.length >= 5 && f2.seen.length >= 2 && unrouted.length >= 1;
        },
        { what: "each topic's batches routed", intervalMs: 100 },
      );
      // Node 1: its history from its replay ROUTER, then live; every batch whole and in order, and only its own.
      expect(f1.seen.slice(0, 3).map((s) => [s.seq, s.source])).toEqual([
        [0, "replay"],
        [1, "replay"],
        [2, "replay"],
      ]);
      for (const f of [f1, f2]) {
        expect(f.seen.map((s) => s.seq)).toEqual(Array.from({ length: f.seen.length }, (_, i) => i));
        for (const s of f.seen) {
          expect(s.events).toEqual(expectedEvents(s.seq));
          expect(s.rank).toBe(0);
        }
        expect(f.resets).toEqual([]);
        expect(f.sub.stats()).toMatchObject({ invalidBatches: 0, invalidMessages: 0, unknownEvents: 0, connected: true });
      }
      expect(new Set(unrouted)).toEqual(new Set(["unknown-topic"]));

      // Idle for several heartbeat timeouts: libzmq's PUB answers the bound side's PINGs.
      await Bun.sleep(1_200);
      expect(listener.publishers).toBe(3);
      expect([f1.sub.stats().connected, f2.sub.stats().connected]).toEqual([true, true]);

      // Node 1 dies; a new process takes its replay port, counts from 0 with 12 batches of history,
      // and connects again: its first batch on the new connection starts the replay that shows the restart.
      const before = f1.seen.length;
      await one.proc.kill();
      await waitUntil(() => !f1.sub.stats().connected, { what: "node 1's stream disconnected" });
      const again = await connectingPublisher(python, endpoint, "kv@node-1@model", 12 + before, one.replayPort);
      await waitUntil(
        async () => {
          await again.command("publish 1");
          return f1.resets.length > 0 && f1.seen.length > before + 12;
        },
        { what: "the restart seen and the new history replayed", intervalMs: 100 },
      );
      expect(f1.resets).toEqual(["publisher-restarted"]);
      const fresh = f1.seen.slice(before);
      expect(fresh.slice(0, 12 + before).every((s) => s.source === "replay")).toBe(true);
      expect(fresh.map((s) => s.seq)).toEqual(Array.from({ length: fresh.length }, (_, i) => i));
      for (const s of fresh) expect(s.events).toEqual(expectedEvents(s.seq));
    },
    60_000,
  );

  testWithSystemPython(
    PACKAGES,
    "the sim-engine's publisher with a host endpoint connects to a libzmq SUB that binds, as llm-d's indexer does",
    async (python) => {
      const COUNT = 3;
      const sub = new JsonLinesProcess([python, BOUND_SUBSCRIBER, "kv@", String(COUNT)]);
      children.push(sub);
      const { port } = (await sub.line((l) => "port" in l)) as { port: number };
      const topic = "kv@sim-1@meta-llama/Llama-3.1-8B";
      const sim = await startSim([
        "--model",
        "meta-llama/Llama-3.1-8B",
        "--itl-ms",
        "1",
        "--output-len",
        "2",
        "--kv-events-config",
        JSON.stringify({ enable_kv_cache_events: true, endpoint: `tcp://127.0.0.1:${port}`, topic }),
      ]);
      // Each request caches its prompt's blocks: one batch of BlockStored. Until the SUB's subscription reaches
      // the sim's PUB (just after it connects), batches are dropped, so ask until COUNT came through.
      let i = 0;
      await waitUntil(
        async () => {
          const res = await fetch(`${sim.api}/v1/completions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ model: "meta-llama/Llama-3.1-8B", max_tokens: 2, prompt: `request ${i++}: ${"a fairly long prompt ".repeat(20)}` }),
          });
          expect(res.status).toBe(200);
          return sub.lines.some((l) => l.event === "done");
        },
        { what: "the bound SUB received the sim's batches", intervalMs: 100 },
      );
      const got = sub.lines.filter((l) => "topic" in l) as Array<{ topic: string; frames: number; seq: number; pod: string; model: string; batch: unknown[] }>;
      expect(got).toHaveLength(COUNT);
      expect(got.map((g) => g.seq)).toEqual(Array.from({ length: COUNT }, (_, k) => got[0]!.seq + k));
      for (const g of got) {
        expect([g.topic, g.frames, g.pod, g.model]).toEqual([topic, 3, "sim-1", "meta-llama/Llama-3.1-8B"]);
        const [ts, events] = g.batch as [number, Array<{ type: string; block_hashes: unknown[]; token_ids: number[]; block_size: number }>];
        expect(Math.abs(ts - Date.now() / 1000)).toBeLessThan(60);
        expect(events.length).toBeGreaterThan(0);
        for (const e of events) {
          expect(e.type).toBe("BlockStored");
          expect(e.token_ids).toHaveLength(e.block_hashes.length * e.block_size);
        }
      }
    },
    60_000,
  );
});
