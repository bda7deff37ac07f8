/**
 * A rogue KV-event publisher: one batch, a gap in its sequence (the gateway
 * asks for a replay), a replay that trickles and never ends, and meanwhile a
 * flood of ~180 KB live batches, then it leaves. The gateway's KV-events
 * service (alone in a child process, as in its worker) must stay bounded in
 * memory, keep its loop answering during the flood and after, keep a healthy
 * engine's stream usable, and say what it dropped.
 */
import { afterAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { encodeKvEventBatch } from "../../src/engines/kv-events/encode.ts";
import { blockStored } from "../../src/engines/kv-events/model.ts";
import { KvEventPublisher } from "../../src/engines/kv-events/publisher.ts";
import { parseReplayRequest, publishedFrames, replayBatchFrames, replayEndFrames } from "../../src/engines/kv-events/wire.ts";
import { PubSocket } from "../../src/engines/zmq/pub-socket.ts";
import { RouterSocket } from "../../src/engines/zmq/router-socket.ts";
import { JsonLinesProcess } from "../helpers/json-lines-process.ts";

interface Line {
  at: number;
  lagMs: number;
  rss: number;
  slots: { live: boolean; blocks: number; dropped: number; drops: Record<string, number> }[];
}

/** Batches in the flood (each ~180 KB: ~540 MB in all; the loop stops by itself). */
const FLOOD_BATCHES = 3_000;
const MB = 1024 * 1024;

const cleanup: Array<() => unknown> = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

const batchOf = (seed: number, blocks: number, tokenBase: number) =>
  encodeKvEventBatch({
    ts: 1_700_000_000 + seed,
    events: [
      blockStored({
        blockHashes: Array.from({ length: blocks }, (_, i) => BigInt(seed * 1_000_000 + i)),
        parentBlockHash: null,
        tokenIds: Array.from({ length: blocks * 16 }, (_, i) => tokenBase + i),
        blockSize: 16,
      }),
    ],
    dataParallelRank: 0,
  });

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : 0;
}

test("a publisher flooding after a gap while its replay trickles: memory bounded, the loop answers, the healthy stream stays live, the drops counted", async () => {
  // The healthy engine: a real publisher, a small batch every 200 ms.
  const healthy = new KvEventPublisher({ endpoint: "tcp://127.0.0.1:0", replayEndpoint: "tcp://127.0.0.1:0" });
  cleanup.push(() => healthy.close());
  let h = 0;
  const healthyTimer = setInterval(
    () =>
      healthy.publish([
        blockStored({ blockHashes: [BigInt(++h)], parentBlockHash: null, tokenIds: Array.from({ length: 16 }, (_, i) => h * 16 + i), blockSize: 16 }),
      ]),
    200,
  );
  cleanup.push(() => clearInterval(healthyTimer));

  // The rogue: its first replay (from 0) is honest; every later one sends its anchor, then one batch every 500 ms (under the 2 s replay timeout), never the end.
  const topic = new Uint8Array(0);
  const first = batchOf(1, 1, 0);
  let trickle: ReturnType<typeof setInterval> | undefined;
  let honest = true;
  const router = new RouterSocket(
    "tcp://127.0.0.1:0",
    {},
    {
      message: (identity, frames) => {
        if (parseReplayRequest(frames) === undefined) return;
        router.send(identity, replayBatchFrames(topic, 0, first));
        if (honest) {
          router.send(identity, replayEndFrames(true));
          return;
        }
        if (trickle !== undefined) clearInterval(trickle);
        let s = 0;
        trickle = setInterval(() => router.send(identity, replayBatchFrames(topic, ++s, batchOf(100 + s, 1, 0))), 500);
      },
    },
  );
  const pub = new PubSocket("tcp://127.0.0.1:0", { sendHwmMessages: 32 });
  const stopRogue = () => {
    if (trickle !== undefined) clearInterval(trickle);
    trickle = undefined;
    pub.close();
    router.close();
  };
  cleanup.push(stopRogue);

  const child = new JsonLinesProcess([
    process.execPath,
    "test/helpers/kv-events-service-process.ts",
    JSON.stringify({
      staleAfterMs: 3_000,
      capacity: 65_536,
      follow: [
        {
          slot: 0,
          id: "rogue",
          source: { endpoint: `tcp://127.0.0.1:${pub.port}`, replayEndpoint: router.endpoint.replace("0.0.0.0", "127.0.0.1"), topic: "" },
        },
        {
          slot: 1,
          id: "healthy",
          source: {
            endpoint: healthy.endpoint.replace("0.0.0.0", "127.0.0.1"),
            replayEndpoint: healthy.replayEndpoint!.replace("0.0.0.0", "127.0.0.1"),
            topic: "",
          },
        },
      ],
    }),
  ]);
  cleanup.push(() => child.kill());
  const lines = child.lines as unknown as Line[];
  await child.line((l) => (l as unknown as Line).slots.every((s) => s.live), 30_000);
  const baseline = rssOf(child.pid);

  // The gap: seq 5 after 0. Then the flood, bounded, while the replay trickles.
  honest = false;
  pub.send(publishedFrames(topic, 5, batchOf(2, 1, 100)));
  await Bun.sleep(300);
  const big = batchOf(3, 2048, 1_000_000);
  expect(big.length).toBeGreaterThan(160_000);
  const floodFrom = lines.length;
  let peak = baseline;
  const sampler = setInterval(() => (peak = Math.max(peak, rssOf(child.pid))), 50);
  cleanup.push(() => clearInterval(sampler));
  for (let i = 0; i < FLOOD_BATCHES; i++) {
    pub.send(publishedFrames(topic, 6 + i, big));
    if (i % 4 === 3) await Bun.sleep(1);
  }
  const floodTo = lines.length;
  stopRogue();
  const leftAt = Date.now();
  // After the publisher left: 5 s of the child's reports (a stalled loop reports late; wait for it, boundedly).
  await child.line((l) => (l as unknown as Line).at > leftAt + 5_000, 90_000);
  clearInterval(sampler);
  peak = Math.max(peak, rssOf(child.pid));

  const during = lines.slice(floodFrom, floodTo);
  const after = lines.filter((l) => l.at > leftAt);
  const maxLag = Math.max(...lines.slice(floodFrom).map((l) => l.lagMs));
  const healthyLive = during.filter((l) => l.slots[1]!.live).length / Math.max(1, during.length);
  const rogue = lines[lines.length - 1]!.slots[0]!;
  console.log(
    JSON.stringify({
      baselineMB: Math.round(baseline / MB),
      peakMB: Math.round(peak / MB),
      growthMB: Math.round((peak - baseline) / MB),
      maxLagMs: maxLag,
      maxLagAfterLeftMs: Math.max(...after.map((l) => l.lagMs)),
      healthyLiveShare: healthyLive.toFixed(2),
      reports: during.length,
      rogueDropped: rogue.dropped,
      rogueDrops: rogue.drops,
    }),
  );

  // ~540 MB went out; what the gateway holds is bounded by its budgets (32 MiB a stream, 128 MiB in all) plus what decoding and the allocator keep.
  expect(peak - baseline).toBeLessThan(300 * MB);
  // The loop answered all along: no stall near the seconds a synchronous drain of the backlog took (widened for a busy host).
  expect(maxLag).toBeLessThan(2_000);
  // The healthy stream stayed usable through the flood.
  expect(healthyLive).toBeGreaterThan(0.8);
  expect(lines[lines.length - 1]!.slots[1]!.live).toBe(true);
  // The rogue's batches were dropped, counted, and its index dropped with them.
  expect(rogue.dropped).toBeGreaterThan(0);
  expect(rogue.drops["replay-overrun"]! + rogue.drops["apply-overrun"]!).toBeGreaterThan(0);
}, 240_000);
