/** KvEventPublisher and KvEventSubscriber over loopback: history by replay, gaps repaired, restarts and dead replay sockets reported, garbage counted. */
import { afterEach, describe, expect, test } from "bun:test";
import { encodeKvEventBatch } from "../../src/engines/kv-events/encode.ts";
import { blockStored, type KvCacheEvent, type KvEventBatch } from "../../src/engines/kv-events/model.ts";
import { KvEventPublisher } from "../../src/engines/kv-events/publisher.ts";
import { type BatchInfo, KvEventSubscriber, type KvEventSubscriberOptions, type ResetReason } from "../../src/engines/kv-events/subscriber.ts";
import {
  parseReplayReply,
  parseReplayRequest,
  publishedFrames,
  replayBatchFrames,
  replayEndFrames,
  replayRequestFrames,
} from "../../src/engines/kv-events/wire.ts";
import { DealerSocket } from "../../src/engines/zmq/dealer-socket.ts";
import { PubSocket } from "../../src/engines/zmq/pub-socket.ts";
import { RouterSocket } from "../../src/engines/zmq/router-socket.ts";
import { waitUntil } from "../helpers/processes.ts";
import { freePort } from "../helpers/zmtp-raw-peer.ts";

const text = (s: string): Uint8Array => new TextEncoder().encode(s);

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});
function track<T extends { close(): void }>(x: T): T {
  cleanups.push(() => x.close());
  return x;
}

/** One BlockStored whose single hash and tokens say which batch it was. */
const stored = (n: number): KvCacheEvent[] => [blockStored({ blockHashes: [BigInt(n)], parentBlockHash: null, tokenIds: [n, n], blockSize: 2 })];

function subscriber(options: KvEventSubscriberOptions) {
  const seen: Array<{ n: number; info: BatchInfo; batch: KvEventBatch }> = [];
  const resets: ResetReason[] = [];
  const invalid: number[] = [];
  const sub = track(
    new KvEventSubscriber(
      { heartbeatIntervalMs: 0, replayTimeoutMs: 500, reconnectIntervalMs: 20, reconnectIntervalMaxMs: 100, ...options },
      {
        batch: (batch, info) => {
          const e = batch.events[0];
          seen.push({ n: e?.type === "BlockStored" ? Number(e.blockHashes[0]) : -1, info, batch });
        },
        reset: (r) => resets.push(r),
        invalidBatch: (seq) => invalid.push(seq),
      },
    ),
  );
  return { sub, seen, resets, invalid, ns: () => seen.map((s) => s.n), seqs: () => seen.map((s) => s.info.seq) };
}

describe("publisher to subscriber", () => {
  test("history before the subscriber arrives comes by replay, then live; the topic filters; batches decode as published", async () => {
    const pub = track(
      new KvEventPublisher({ endpoint: "tcp://127.0.0.1:0", replayEndpoint: "tcp://127.0.0.1:0", topic: "kv@host@model", dataParallelRank: 2 }),
    );
    for (let n = 0; n < 3; n++) pub.publish(stored(n), 1700000000 + n);
    const s = subscriber({ endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint, topic: "kv@host" });
    const other = subscriber({ endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint, topic: "other" });
    await waitUntil(() => s.seen.length === 3 && pub.stats().subscribers === 2, { what: "history" });
    for (let n = 3; n < 6; n++) pub.publish(stored(n), 1700000000 + n);
    await waitUntil(() => s.seen.length === 6, { what: "live batches" });
    expect(s.ns()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(s.seen.map((x) => x.info.source)).toEqual(["replay", "replay", "replay", "live", "live", "live"]);
    expect(s.seen[4]!.batch).toEqual({ ts: 1700000004, events: stored(4), dataParallelRank: 2 });
    expect(s.resets).toEqual([]);
    // The other topic got nothing live; its replay (which vLLM does not filter by topic) still brought the history.
    expect(other.seen.filter((x) => x.info.source === "live")).toEqual([]);
    expect(pub.stats()).toMatchObject({ published: 6, droppedToSlowSubscribers: 0, replayRequests: 2 });
  });

  test("a publisher restarted on the same ports is detected, the index is reset, the new history follows", async () => {
    const [port, replayPort] = [await freePort(), await freePort()];
    const endpoints = { endpoint: `tcp://127.0.0.1:${port}`, replayEndpoint: `tcp://127.0.0.1:${replayPort}` };
    let pub = new KvEventPublisher(endpoints);
    const s = subscriber(endpoints);
    await waitUntil(() => pub.stats().subscribers === 1 && s.sub.stats().replayRequests === 1, { what: "subscribed" });
    await Bun.sleep(50);
    for (let n = 0; n < 4; n++) pub.publish(stored(n));
    await waitUntil(() => s.seen.length === 4, { what: "first publisher's batches" });
    pub.close();
    // The new process counts from 0 again and gets past the subscriber's last sequence before it reconnects.
    pub = track(new KvEventPublisher(endpoints));
    for (let n = 100; n < 106; n++) pub.publish(stored(n));
    await waitUntil(() => s.ns().includes(105), { what: "second publisher's history" });
    expect(s.resets).toEqual(["publisher-restarted"]);
    expect(s.ns().slice(4)).toEqual([100, 101, 102, 103, 104, 105]);
  });

  test("without a reachable replay socket, a reconnection resets with replay-failed and the live stream carries on", async () => {
    const pub = track(new KvEventPublisher({ endpoint: "tcp://127.0.0.1:0" }));
    const s = subscriber({ endpoint: pub.endpoint, replayEndpoint: `tcp://127.0.0.1:${await freePort()}`, replayTimeoutMs: 200 });
    await waitUntil(() => pub.stats().subscribers === 1 && s.sub.stats().replayFailures === 1, { what: "first replay to fail" });
    pub.publish(stored(0));
    pub.publish(stored(1));
    await waitUntil(() => s.seen.length === 2, { what: "live batches" });
    expect(s.resets).toEqual([]);
    const stats = s.sub.stats();
    expect(stats.connected).toBe(true);
    expect(stats.lastSequence).toBe(1);
  });
});

describe("subscriber against a scripted publisher", () => {
  async function scripted(options: { replayTopicFrame: boolean }) {
    const payloads = new Map<number, Uint8Array>();
    const pub = track(new PubSocket("tcp://127.0.0.1:0"));
    const requests: number[] = [];
    const router = track(
      new RouterSocket(
        "tcp://127.0.0.1:0",
        {},
        {
          message: (id, frames) => {
            const from = parseReplayRequest(frames)!;
            requests.push(from);
            for (const [seq, payload] of [...payloads].sort(([a], [b]) => a - b))
              if (seq >= from) router.send(id, replayBatchFrames(options.replayTopicFrame ? text("kv") : undefined, seq, payload));
            router.send(id, replayEndFrames(options.replayTopicFrame));
          },
        },
      ),
    );
    /** Record batch `seq`; send it live unless `lost`. */
    const emit = (seq: number, lost = false, payload = encodeKvEventBatch({ ts: seq, events: stored(seq), dataParallelRank: 0 })): void => {
      payloads.set(seq, payload);
      if (!lost) pub.send(publishedFrames(text("kv"), seq, payload));
    };
    return { pub, router, emit, requests };
  }

  for (const replayTopicFrame of [true, false]) {
    test(`a lost batch is detected by its sequence and filled by replay (${replayTopicFrame ? "current" : "earlier"} vLLM reply form)`, async () => {
      const p = await scripted({ replayTopicFrame });
      const s = subscriber({ endpoint: `tcp://127.0.0.1:${p.pub.port}`, replayEndpoint: `tcp://127.0.0.1:${p.router.port}` });
      await waitUntil(() => p.requests.length === 1 && p.pub.subscriberCount === 1, { what: "first replay" });
      await Bun.sleep(50);
      p.emit(0);
      p.emit(1);
      p.emit(2, true);
      p.emit(3, true);
      p.emit(4);
      await waitUntil(() => s.seen.length === 5, { what: "all five" });
      expect(s.ns()).toEqual([0, 1, 2, 3, 4]);
      expect(s.seen.map((x) => x.info.source)).toEqual(["live", "live", "replay", "replay", "replay"]);
      expect(p.requests).toEqual([0, 1]);
      expect(s.resets).toEqual([]);
    });
  }

  test("garbage is counted and dropped: a payload that is not a batch, a message that is not three frames", async () => {
    const p = await scripted({ replayTopicFrame: true });
    const s = subscriber({ endpoint: `tcp://127.0.0.1:${p.pub.port}`, replayEndpoint: `tcp://127.0.0.1:${p.router.port}` });
    await waitUntil(() => p.requests.length === 1 && p.pub.subscriberCount === 1, { what: "first replay" });
    await Bun.sleep(50);
    p.emit(0);
    p.emit(1, false, text("not msgpack \xc1"));
    p.pub.send([text("kv"), text("two frames")]);
    p.emit(2);
    await waitUntil(() => s.seen.length === 2, { what: "the good batches" });
    expect(s.ns()).toEqual([0, 2]);
    expect(s.invalid).toEqual([1]);
    expect(s.sub.stats()).toMatchObject({ invalidBatches: 1, invalidMessages: 1, liveBatches: 3, lastSequence: 2 });
    expect(s.resets).toEqual([]);
  });

  test("a handler that throws is counted and the stream goes on", async () => {
    const pub = track(new KvEventPublisher({ endpoint: "tcp://127.0.0.1:0" }));
    let calls = 0;
    const sub = track(
      new KvEventSubscriber(
        { endpoint: pub.endpoint, heartbeatIntervalMs: 0 },
        {
          batch: () => {
            calls++;
            throw new Error("index bug");
          },
          reset: () => {},
        },
      ),
    );
    await waitUntil(() => pub.stats().subscribers === 1, { what: "subscriber" });
    await Bun.sleep(50);
    pub.publish(stored(0));
    pub.publish(stored(1));
    await waitUntil(() => calls === 2, { what: "both batches" });
    expect(sub.stats()).toMatchObject({ handlerErrors: 2, connected: true });
  });
});

describe("publisher's replay socket", () => {
  test("a replay longer than the ROUTER's high-water mark arrives whole; a malformed request is ignored and counted", async () => {
    const pub = track(new KvEventPublisher({ endpoint: "tcp://127.0.0.1:0", replayEndpoint: "tcp://127.0.0.1:0", bufferSteps: 3000, topic: "t" }));
    const events = Array.from({ length: 20 }, (_, i) => stored(i)[0]!);
    for (let n = 0; n < 3500; n++) pub.publish(events);
    const replies: string[] = [];
    let seqs = 0;
    let ended = false;
    const dealer = track(
      new DealerSocket(
        pub.replayEndpoint!,
        {},
        {
          connected: () => {
            dealer.send([text("garbage")]);
            dealer.send(replayRequestFrames(100));
          },
          message: (frames) => {
            const r = parseReplayReply(frames);
            if (r.kind === "batch") {
              if (seqs === 0) replies.push(`first:${r.seq}:${frames.length}`);
              seqs++;
            } else if (r.kind === "end") ended = true;
            else replies.push(r.error);
          },
        },
      ),
    );
    await waitUntil(() => ended, { what: "end of replay", timeoutMs: 30_000 });
    // 3,500 published, 3,000 kept: 500…3,499.
    expect(replies).toEqual(["first:500:4"]);
    expect(seqs).toBe(3000);
    expect(pub.stats()).toMatchObject({ replayRequests: 1, invalidReplayRequests: 1, replayedBatches: 3000 });
  }, 60_000);
});
