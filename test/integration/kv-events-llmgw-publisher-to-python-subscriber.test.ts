/**
 * Interop, llmgw → libzmq: KvEventPublisher feeds a subscriber written with
 * Debian's python3-zmq and python3-msgpack
 * (test/helpers/kv-events-python/subscriber.py): a SUB filtered by topic
 * prefix with libzmq heartbeats on, a SUB to another topic, and a DEALER
 * replay request. Frames, sequence bytes and msgpack layout are checked as a
 * vLLM consumer reads them, in both the current and the earlier vLLM forms.
 */
import { afterEach, describe, expect } from "bun:test";
import { join } from "node:path";
import { blockStored, type KvCacheEvent } from "../../src/engines/kv-events/model.ts";
import { KvEventPublisher } from "../../src/engines/kv-events/publisher.ts";
import { JsonLinesProcess } from "../helpers/json-lines-process.ts";
import { testWithSystemPython } from "../helpers/system-tools.ts";

const SCRIPT = join(import.meta.dir, "..", "helpers", "kv-events-python", "subscriber.py");
const PACKAGES = { zmq: "python3-zmq", msgpack: "python3-msgpack" };
const LIVE = 5;

const children: JsonLinesProcess[] = [];
const publishers: KvEventPublisher[] = [];
afterEach(async () => {
  for (const p of publishers.splice(0)) p.close();
  await Promise.all(children.splice(0).map((c) => c.kill()));
});

/** Batch k: a block whose hash is above 2^63 (k even) or sha256-sized bytes (k odd), and every third batch a removal. */
function events(k: number): KvCacheEvent[] {
  const hash = k % 2 === 0 ? 2n ** 63n + BigInt(k) : new Uint8Array(32).fill(k);
  const out: KvCacheEvent[] = [
    blockStored({
      blockHashes: [hash],
      parentBlockHash: null,
      tokenIds: Array.from({ length: 4 }, (_, i) => k * 4 + i),
      blockSize: 4,
      loraName: k === 1 ? "sql-lora" : null,
      groupIdx: 0,
    }),
  ];
  if (k % 3 === 2) out.push({ type: "BlockRemoved", blockHashes: [hash], medium: "GPU", groupIdx: null });
  if (k === 4) out.push({ type: "AllBlocksCleared" });
  return out;
}

/** What python3-msgpack makes of batch k's events (subscriber.py's jsonable: big ints and bytes as strings). */
function pythonView(k: number, layout: "tagged-map" | "tagged-array"): unknown[] {
  const hash = k % 2 === 0 ? `int:${2n ** 63n + BigInt(k)}` : `hex:${Buffer.from(new Uint8Array(32).fill(k)).toString("hex")}`;
  const tokens = Array.from({ length: 4 }, (_, i) => k * 4 + i);
  const lora = k === 1 ? "sql-lora" : null;
  const out: unknown[] =
    layout === "tagged-map"
      ? [
          {
            type: "BlockStored",
            block_hashes: [hash],
            parent_block_hash: null,
            token_ids: tokens,
            block_size: 4,
            lora_id: null,
            medium: "GPU",
            lora_name: lora,
            group_idx: 0,
          },
        ]
      : [["BlockStored", [hash], null, tokens, 4, null, "GPU", lora, null, 0]];
  if (k % 3 === 2) out.push(layout === "tagged-map" ? { type: "BlockRemoved", block_hashes: [hash], medium: "GPU" } : ["BlockRemoved", [hash], "GPU"]);
  if (k === 4) out.push(layout === "tagged-map" ? { type: "AllBlocksCleared" } : ["AllBlocksCleared"]);
  return out;
}

const variants = [
  { label: "current vLLM form: tagged maps, replies with the topic frame", layout: "tagged-map", replayTopicFrame: true },
  { label: "earlier vLLM form: tagged arrays, replies without the topic frame", layout: "tagged-array", replayTopicFrame: false },
] as const;

describe("llmgw's publisher feeds a Python (libzmq) SUB and answers its DEALER's replay request", () => {
  for (const v of variants) {
    testWithSystemPython(
      PACKAGES,
      v.label,
      async (python) => {
        const pub = new KvEventPublisher({
          endpoint: "tcp://127.0.0.1:0",
          replayEndpoint: "tcp://127.0.0.1:0",
          topic: "kv@node-1@model",
          dataParallelRank: 1,
          layout: v.layout,
          replayTopicFrame: v.replayTopicFrame,
        });
        publishers.push(pub);
        // History published before anyone subscribed.
        for (let k = 0; k < 3; k++) pub.publish(events(k));
        const py = new JsonLinesProcess([python, SCRIPT, pub.endpoint, pub.replayEndpoint!, "kv@node-1", "other-topic", String(LIVE)]);
        children.push(py);
        await py.line((l) => l.event === "connected");

        // libzmq subscribes asynchronously: publish until LIVE messages have reached it.
        let k = 3;
        while (py.lines.filter((l) => l.event === "live").length < LIVE) {
          pub.publish(events(k++));
          await Bun.sleep(30);
        }
        const done = await py.line((l) => l.event === "done", 20_000);
        const live = py.lines.filter((l) => l.event === "live");
        const replay = py.lines.filter((l) => l.event === "replay");
        const end = py.lines.find((l) => l.event === "end");

        // Live: three frames, the topic, an 8-byte big-endian sequence, a msgspec-shaped batch, consecutive sequences.
        const first = live[0]!.seq as number;
        expect(live.map((l) => l.seq)).toEqual(Array.from({ length: LIVE }, (_, i) => first + i));
        for (const l of live) {
          const seq = l.seq as number;
          expect(l).toMatchObject({ frames: 3, topic: "kv@node-1@model", seq_hex: seq.toString(16).padStart(16, "0"), ts_is_float: true });
          const [ts, evs, rank] = l.batch as [number, unknown[], number];
          expect(Math.abs(ts - Date.now() / 1000)).toBeLessThan(60);
          expect(rank).toBe(1);
          expect(evs).toEqual(pythonView(seq, v.layout));
        }

        // Replay from 0: everything published by then, in order, in the chosen form, then the -1 marker.
        const replayed = replay.map((l) => l.seq as number);
        expect(replayed[0]).toBe(0);
        expect(replayed).toEqual(Array.from({ length: replayed.length }, (_, i) => i));
        expect(replayed.length).toBeGreaterThanOrEqual(first + LIVE);
        expect(replayed.length).toBeLessThanOrEqual(pub.stats().published);
        for (const l of replay) {
          expect(l.frames).toBe(v.replayTopicFrame ? 4 : 3);
          expect((l.batch as unknown[])[1]).toEqual(pythonView(l.seq as number, v.layout));
        }
        expect(end!.frames).toEqual(v.replayTopicFrame ? ["", "", "ffffffffffffffff", ""] : ["", "ffffffffffffffff", ""]);

        // The other topic got nothing; libzmq's heartbeats were answered (no disconnect while idle).
        expect(done).toMatchObject({ other_topic_messages: 0, disconnects: 0 });
        expect(pub.stats()).toMatchObject({ replayRequests: 1, invalidReplayRequests: 0, droppedToSlowSubscribers: 0 });
        expect(await py.exited).toBe(0);
      },
      60_000,
    );
  }
});
