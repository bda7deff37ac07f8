/**
 * KvTopicListener over loopback: engines' publishers connect to the
 * gateway's one bound SUB socket (llm-d's topology) and each batch reaches
 * the stream of its topic, history by each engine's own replay socket; an
 * unknown topic, a malformed message, garbage and connections past the
 * limit are counted or closed and reach no stream.
 */
import { afterEach, describe, expect, test } from "bun:test";
import net from "node:net";
import { blockStored, type KvCacheEvent } from "../../src/engines/kv-events/model.ts";
import { KvEventPublisher } from "../../src/engines/kv-events/publisher.ts";
import { DEFAULT_MAX_KV_MESSAGE_BYTES, KvEventSubscriber, type ResetReason } from "../../src/engines/kv-events/subscriber.ts";
import { KvTopicListener } from "../../src/engines/kv-events/topic-listener.ts";
import { encodeSequence } from "../../src/engines/kv-events/wire.ts";
import type { KvUnroutedReason } from "../../src/shared/kv-event-stats.ts";
import { waitUntil } from "../helpers/processes.ts";
import { dialRaw } from "../helpers/zmtp-raw-peer.ts";

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});
function track<T extends { close(): void }>(x: T): T {
  cleanups.push(() => x.close());
  return x;
}

const stored = (k: number): KvCacheEvent[] => [
  blockStored({ blockHashes: [BigInt(1000 + k)], parentBlockHash: null, tokenIds: Array.from({ length: 16 }, (_, i) => k + i), blockSize: 16 }),
];

function listener(maxPublishers = 16) {
  const unrouted: KvUnroutedReason[] = [];
  const l = track(
    new KvTopicListener(
      "tcp://127.0.0.1:0",
      { maxMessageBytes: DEFAULT_MAX_KV_MESSAGE_BYTES, maxPublishers, heartbeat: { intervalMs: 1_000, timeoutMs: 10_000 } },
      { unrouted: (r) => unrouted.push(r) },
    ),
  );
  return { l, unrouted };
}

function follow(l: KvTopicListener, topic: string, replayEndpoint: string | undefined) {
  const seen: Array<{ seq: number; source: string; hash: bigint }> = [];
  const resets: ResetReason[] = [];
  const sub = track(
    new KvEventSubscriber(
      { feed: (events) => l.attach(topic, events), ...(replayEndpoint ? { replayEndpoint } : {}), replayTimeoutMs: 2_000 },
      {
        batch: (b, info) => {
          const e = b.events[0]!;
          seen.push({ seq: info.seq, source: info.source, hash: e.type === "BlockStored" ? (e.blockHashes[0] as bigint) : -1n });
        },
        reset: (r) => resets.push(r),
      },
    ),
  );
  return { sub, seen, resets };
}

/** A vLLM-style publisher that connects to the listener, as `--kv-events-config '{"endpoint":"tcp://gateway:5557",…}'` makes vLLM's. */
function engine(l: KvTopicListener, topic: string) {
  return track(
    new KvEventPublisher({
      endpoint: `tcp://127.0.0.1:${new URL(l.endpoint.replace("tcp:", "http:")).port}`,
      connect: true,
      replayEndpoint: "tcp://127.0.0.1:0",
      topic,
    }),
  );
}

describe("the gateway's bound SUB socket routes by topic", () => {
  test("two engines connect; each stream gets its own engine's batches, history included, and an unknown topic is counted and dropped", async () => {
    const { l, unrouted } = listener();
    const a = engine(l, "kv@pod-a@m");
    const b = engine(l, "kv@pod-b@m");
    const rogue = engine(l, "kv@pod-c@m");
    // History before anyone listens for it: batches lost on the way, kept for replay.
    for (let k = 0; k < 3; k++) a.publish(stored(k));
    const fa = follow(l, "kv@pod-a@m", a.replayEndpoint);
    const fb = follow(l, "kv@pod-b@m", b.replayEndpoint);
    await waitUntil(() => a.stats().subscribers === 1 && b.stats().subscribers === 1 && rogue.stats().subscribers === 1, {
      what: "three publishers connected",
    });
    expect(l.publishers).toBe(3);

    // Repeated: the first of a fresh connection may reach a publisher before the SUB's subscription does.
    await waitUntil(
      () => {
        a.publish(stored(100 + a.stats().published));
        b.publish(stored(200 + b.stats().published));
        rogue.publish(stored(300));
        return fa.seen.length >= 5 && fb.seen.length >= 2 && unrouted.length >= 1;
      },
      { what: "batches routed", intervalMs: 50 },
    );
    // A's stream is A's sequence, whole, from its replay socket then live; none of B's or the rogue's.
    expect(fa.seen.map((s) => s.seq)).toEqual(Array.from({ length: fa.seen.length }, (_, i) => i));
    expect(fa.seen.slice(0, 3).map((s) => [s.hash, s.source])).toEqual([
      [1000n, "replay"],
      [1001n, "replay"],
      [1002n, "replay"],
    ]);
    for (const s of fa.seen) expect(s.hash < 1200n).toBe(true);
    for (const s of fb.seen) expect(s.hash >= 1200n && s.hash < 1300n).toBe(true);
    expect(new Set(unrouted)).toEqual(new Set(["unknown-topic"]));
    expect([fa.resets, fb.resets]).toEqual([[], []]);
    expect(fa.sub.stats()).toMatchObject({ connected: true, invalidMessages: 0 });
  });

  test("an engine that restarts and connects again: the stream sees a new connection and the restart", async () => {
    const { l } = listener();
    const replayPort = { endpoint: "" };
    let a = engine(l, "kv@pod-a@m");
    replayPort.endpoint = a.replayEndpoint!;
    const fa = follow(l, "kv@pod-a@m", a.replayEndpoint);
    await waitUntil(
      () => {
        a.publish(stored(a.stats().published));
        return fa.seen.length >= 3;
      },
      { what: "first engine's batches", intervalMs: 50 },
    );
    a.close();
    await waitUntil(() => !fa.sub.stats().connected, { what: "the stream disconnected with its connection" });
    // The same engine again (same replay address), counting from 0: only the replay can tell it restarted.
    a = track(
      new KvEventPublisher({
        endpoint: `tcp://127.0.0.1:${new URL(l.endpoint.replace("tcp:", "http:")).port}`,
        connect: true,
        replayEndpoint: replayPort.endpoint.replace("0.0.0.0", "127.0.0.1"),
        topic: "kv@pod-a@m",
      }),
    );
    const before = fa.seen.length;
    await waitUntil(
      () => {
        a.publish(stored(500 + a.stats().published));
        return fa.resets.length > 0 && fa.seen.length > before;
      },
      { what: "the restart detected", intervalMs: 50 },
    );
    // Restarted behind the stream's last sequence (replay-incomplete) or already past it (publisher-restarted): either way, once.
    expect(fa.resets).toHaveLength(1);
    expect(["publisher-restarted", "replay-incomplete"]).toContain(fa.resets[0]!);
    expect(fa.sub.stats().dialAttempts).toBe(2);
  });

  test("malformed messages, garbage and too many publishers reach no stream and leave the socket serving", async () => {
    const { l, unrouted } = listener(3);
    const fa = follow(l, "kv@pod-a@m", undefined);
    const port = Number(new URL(l.endpoint.replace("tcp:", "http:")).port);

    // A PUB peer that sends two frames where three are due, then a topic far longer than any engine's.
    const raw = await dialRaw(port, { socketType: "PUB" });
    await raw.ready;
    raw.send([new TextEncoder().encode("kv@pod-a@m"), encodeSequence(0)]);
    raw.send([new Uint8Array(4096).fill(0x41), encodeSequence(0), new Uint8Array(1)]);
    await waitUntil(() => unrouted.length === 2, { what: "both counted" });
    expect(unrouted).toEqual(["malformed", "unknown-topic"]);

    // Not ZMTP at all: that connection is closed.
    const garbage = net.connect({ host: "127.0.0.1", port });
    cleanups.push(() => garbage.destroy());
    let garbageClosed = false;
    garbage.on("close", () => (garbageClosed = true));
    garbage.on("error", () => {});
    garbage.on("data", () => {});
    garbage.write(Buffer.alloc(256, 0xee));
    await waitUntil(() => garbageClosed, { what: "garbage closed" });

    // Past the limit (3 connected at once), a connection is closed on arrival.
    const extra = await Promise.all([dialRaw(port, { socketType: "PUB" }), dialRaw(port, { socketType: "PUB" }), dialRaw(port, { socketType: "PUB" })]);
    for (const p of extra) cleanups.push(() => p.close());
    await waitUntil(() => l.refusedConnections >= 1 && extra.filter((p) => p.closed).length >= 1, { what: "one refused" });
    expect(l.publishers).toBeLessThanOrEqual(3);

    // The first peer is still served: a well-formed batch of the followed topic arrives.
    const { encodeKvEventBatch } = await import("../../src/engines/kv-events/encode.ts");
    raw.send([new TextEncoder().encode("kv@pod-a@m"), encodeSequence(7), encodeKvEventBatch({ ts: 1, events: stored(7), dataParallelRank: 0 }, "tagged-map")]);
    await waitUntil(() => fa.seen.length === 1, { what: "the batch routed" });
    expect(fa.seen[0]).toMatchObject({ seq: 7, source: "live", hash: 1007n });
    raw.close();
  });

  test("a topic is one stream's: attaching it twice throws, and closing a stream frees it", () => {
    const { l } = listener();
    const feed = l.attach("kv@p@m", { message() {}, connected() {}, disconnected() {} });
    expect(() => l.attach("kv@p@m", { message() {}, connected() {}, disconnected() {} })).toThrow(/already followed/);
    feed.close();
    expect(l.has("kv@p@m")).toBe(false);
  });
});
