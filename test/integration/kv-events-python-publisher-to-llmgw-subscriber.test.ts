/**
 * Interop, libzmq → llmgw: a vLLM-shaped publisher written with Debian's
 * python3-zmq and python3-msgpack (test/helpers/kv-events-python/publisher.py)
 * feeds KvEventSubscriber. History arrives by replay, lost batches are
 * repaired through the libzmq ROUTER, a restarted publisher is detected, and
 * libzmq answers the subscriber's PINGs. Once in current vLLM's layout
 * (tagged maps, int hashes above 2^63, replies with the topic frame) and once
 * in vLLM 0.9's (tagged arrays, sha256 bytes hashes, replies without it).
 */
import { afterEach, describe, expect } from "bun:test";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { type BlockHash, blockStored, type KvCacheEvent } from "../../src/engines/kv-events/model.ts";
import { KvEventSubscriber, type ResetReason } from "../../src/engines/kv-events/subscriber.ts";
import type { ZmtpCloseReason } from "../../src/engines/zmq/errors.ts";
import { JsonLinesProcess } from "../helpers/json-lines-process.ts";
import { waitUntil } from "../helpers/processes.ts";
import { testWithSystemPython } from "../helpers/system-tools.ts";

const SCRIPT = join(import.meta.dir, "..", "helpers", "kv-events-python", "publisher.py");
const PACKAGES = { zmq: "python3-zmq", msgpack: "python3-msgpack" };

const children: JsonLinesProcess[] = [];
const subscribers: KvEventSubscriber[] = [];
afterEach(async () => {
  for (const s of subscribers.splice(0)) s.close();
  await Promise.all(children.splice(0).map((c) => c.kill()));
});

interface Variant {
  layout: "map" | "array";
  replayForm: "topic" | "plain";
  hashes: "int" | "bytes";
}

/** The events publisher.py puts in batch k (see its event_batch). */
function expectedEvents(k: number, v: Variant): KvCacheEvent[] {
  const hash = (i: number): BlockHash => (v.hashes === "int" ? 2n ** 63n + BigInt(i) * 7919n : new Uint8Array(createHash("sha256").update(String(i)).digest()));
  const current = v.layout === "map";
  const events: KvCacheEvent[] = [
    blockStored({
      blockHashes: [hash(k)],
      parentBlockHash: k > 0 ? hash(k - 1) : null,
      tokenIds: Array.from({ length: 16 }, (_, i) => k * 16 + i),
      blockSize: 16,
      medium: current ? "GPU" : null,
      groupIdx: current ? 0 : null,
      kvCacheSpecKind: current ? "full_attention" : null,
    }),
  ];
  if (k % 4 === 3) events.push({ type: "BlockRemoved", blockHashes: [hash(k - 3)], medium: current ? "GPU" : null, groupIdx: current ? 0 : null });
  return events;
}

async function startPublisher(python: string, v: Variant, ports: { pub: number; replay: number } = { pub: 0, replay: 0 }, preload = 0) {
  const proc = new JsonLinesProcess([
    python,
    SCRIPT,
    String(ports.pub),
    String(ports.replay),
    "kv@node-1@model",
    v.layout,
    v.replayForm,
    v.hashes,
    String(preload),
  ]);
  children.push(proc);
  const hello = await proc.line((l) => "pub" in l);
  let answers = 1;
  const command = async (line: string): Promise<void> => {
    proc.send(line);
    await proc.line(() => true, 15_000, answers++);
  };
  return { proc, ports: { pub: hello.pub as number, replay: hello.replay as number }, command };
}

const variants: Array<[string, Variant]> = [
  ["current vLLM: tagged maps, int hashes, replies with the topic frame", { layout: "map", replayForm: "topic", hashes: "int" }],
  ["vLLM 0.9: tagged arrays, sha256 hashes, replies without the topic frame", { layout: "array", replayForm: "plain", hashes: "bytes" }],
];

describe("a Python (libzmq) vLLM-shaped publisher feeds llmgw's subscriber", () => {
  for (const [label, variant] of variants) {
    testWithSystemPython(
      PACKAGES,
      label,
      async (python) => {
        const first = await startPublisher(python, variant);
        await first.command("publish 3");

        const seen: Array<{ seq: number; source: string; events: KvCacheEvent[]; rank: number | null; ts: number }> = [];
        const resets: ResetReason[] = [];
        const drops: ZmtpCloseReason[] = [];
        const sub = new KvEventSubscriber(
          {
            endpoint: `tcp://127.0.0.1:${first.ports.pub}`,
            replayEndpoint: `tcp://127.0.0.1:${first.ports.replay}`,
            topic: "kv@node-1",
            heartbeatIntervalMs: 100,
            heartbeatTimeoutMs: 500,
            reconnectIntervalMs: 50,
            reconnectIntervalMaxMs: 200,
          },
          {
            batch: (batch, info) => seen.push({ seq: info.seq, source: info.source, events: batch.events, rank: batch.dataParallelRank, ts: batch.ts }),
            reset: (r) => resets.push(r),
            disconnected: (r) => drops.push(r),
          },
        );
        subscribers.push(sub);

        // History from before the subscriber existed, through libzmq's ROUTER.
        await waitUntil(() => seen.length === 3, { what: "history by replay" });
        expect(seen.map((s) => [s.seq, s.source])).toEqual([
          [0, "replay"],
          [1, "replay"],
          [2, "replay"],
        ]);
        // Let the SUBSCRIBE reach libzmq before publishing live.
        await Bun.sleep(300);

        // Live, then two batches lost on the way (buffered, never sent), then live again.
        await first.command("publish 2");
        await first.command("lose 2");
        await first.command("publish 1");
        await waitUntil(() => seen.length === 8, { what: "the gap repaired" });
        expect(seen.map((s) => s.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
        // 5 and 6 exist only in the replay; 7 came live (it revealed the gap) and again in the replay,
        // and is applied once from whichever the subscriber had first: on a busy host either.
        expect(seen.slice(3, 7).map((s) => s.source)).toEqual(["live", "live", "replay", "replay"]);
        for (const s of seen) {
          expect(s.events).toEqual(expectedEvents(s.seq, variant));
          expect(s.rank).toBe(0);
          expect(Math.abs(s.ts - Date.now() / 1000)).toBeLessThan(60);
        }
        expect(resets).toEqual([]);

        // Idle for several heartbeat timeouts: libzmq answers every PING.
        await Bun.sleep(1200);
        expect(drops).toEqual([]);
        expect(sub.stats().connected).toBe(true);

        // The publisher process dies and a new one takes its ports, counting
        // from 0 again and already past the subscriber's last sequence when
        // the subscriber gets back: only the replayed payload can tell.
        await first.proc.kill();
        const second = await startPublisher(python, variant, first.ports, 12);
        await waitUntil(() => resets.length > 0 && seen.length === 8 + 12, { what: "the restart detected and the new history replayed" });
        // And the new publisher's live stream follows on.
        await Bun.sleep(300);
        await second.command("publish 1");
        await waitUntil(() => seen.length === 8 + 13, { what: "the new publisher's first live batch" });
        expect(resets).toEqual(["publisher-restarted"]);
        expect(seen.slice(8).map((s) => [s.seq, s.source])).toEqual([...Array.from({ length: 12 }, (_, i) => [i, "replay"]), [12, "live"]]);
        expect(seen.slice(8).map((s) => s.events)).toEqual(Array.from({ length: 13 }, (_, i) => expectedEvents(i, variant)));
        const stats = sub.stats();
        expect(stats).toMatchObject({ invalidBatches: 0, invalidMessages: 0, unknownEvents: 0, replayFailures: 0, lastSequence: 12 });
      },
      60_000,
    );
  }
});
