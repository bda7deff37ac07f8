/** The subscriber's sequence logic, pure: gaps, reconnections, restarts, failed replays; every batch once and in order, or a reset. */
import { describe, expect, test } from "bun:test";
import { KvByteBudget } from "../../src/engines/kv-events/byte-budget.ts";
import { SequenceTracker } from "../../src/engines/kv-events/sequence-tracker.ts";

const p = (s: string): Uint8Array => new TextEncoder().encode(s);

function tracker(options: { replayAvailable: boolean; maxPendingLive?: number; budget?: KvByteBudget }) {
  const log: string[] = [];
  const t = new SequenceTracker(
    {
      deliver: (seq, payload, source) => log.push(`${source}:${seq}:${new TextDecoder().decode(payload)}`),
      requestReplay: (id, from) => log.push(`replay#${id} from ${from}`),
      cancelReplay: (id) => log.push(`cancel#${id}`),
      reset: (reason) => log.push(`reset:${reason}`),
      dropped: (bound, n) => log.push(`dropped:${bound}:${n}`),
    },
    { replayAvailable: options.replayAvailable, maxPendingLive: options.maxPendingLive ?? 100, ...(options.budget ? { budget: options.budget } : {}) },
  );
  /** Take what was logged since the last call. */
  const take = (): string[] => log.splice(0);
  return { t, take };
}

describe("without a replay endpoint", () => {
  test("in-order batches flow; a gap or a reconnection with state resets and carries on", () => {
    const { t, take } = tracker({ replayAvailable: false });
    t.connected();
    for (const s of [0, 1, 2]) t.live(s, p(`b${s}`));
    t.live(5, p("b5"));
    expect(take()).toEqual(["live:0:b0", "live:1:b1", "live:2:b2", "reset:no-replay-endpoint", "live:5:b5"]);
    t.connected();
    expect(take()).toEqual(["reset:no-replay-endpoint"]);
    t.connected();
    expect(take()).toEqual([]);
    t.live(9, p("b9"));
    expect(take()).toEqual(["live:9:b9"]);
    expect(t.lastSequence).toBe(9);
  });
});

describe("with a replay endpoint", () => {
  test("a first connection fetches the buffer from 0; live batches wait and the ones it covered are skipped", () => {
    const { t, take } = tracker({ replayAvailable: true });
    t.connected();
    t.live(3, p("b3"));
    t.live(4, p("b4"));
    for (const s of [0, 1, 2, 3]) t.replayBatch(1, s, p(`b${s}`));
    t.replayEnd(1);
    expect(take()).toEqual(["replay#1 from 0", "replay:0:b0", "replay:1:b1", "replay:2:b2", "replay:3:b3", "live:4:b4"]);
  });

  test("a gap is filled from the replay, proven continuous by the anchor's payload", () => {
    const { t, take } = tracker({ replayAvailable: true });
    t.connected();
    t.replayEnd(1);
    for (const s of [0, 1]) t.live(s, p(`b${s}`));
    take();
    t.live(4, p("b4"));
    t.live(5, p("b5"));
    expect(take()).toEqual(["replay#2 from 1"]);
    for (const s of [1, 2, 3, 4]) t.replayBatch(2, s, p(`b${s}`));
    t.replayEnd(2);
    expect(take()).toEqual(["replay:2:b2", "replay:3:b3", "replay:4:b4", "live:5:b5"]);
  });

  test("a reconnection to a restarted publisher (same sequence, other payload) resets and fetches its history from 0", () => {
    const { t, take } = tracker({ replayAvailable: true });
    t.connected();
    t.replayEnd(1);
    for (const s of [0, 1, 2]) t.live(s, p(`old${s}`));
    take();
    t.connected();
    t.replayBatch(2, 2, p("new2"));
    t.replayBatch(2, 3, p("new3"));
    t.replayEnd(2);
    // The rest of replay #2 is abandoned as soon as its first batch differs.
    expect(take()).toEqual(["replay#2 from 2", "cancel#2", "reset:publisher-restarted", "replay#3 from 0"]);
    for (const s of [0, 1, 2, 3]) t.replayBatch(3, s, p(`new${s}`));
    t.replayEnd(3);
    expect(take()).toEqual(["replay:0:new0", "replay:1:new1", "replay:2:new2", "replay:3:new3"]);
  });

  test("a live sequence that goes back means a restart", () => {
    const { t, take } = tracker({ replayAvailable: true });
    t.connected();
    t.replayEnd(1);
    for (const s of [0, 1, 2]) t.live(s, p(`old${s}`));
    take();
    t.live(0, p("new0"));
    t.live(1, p("new1"));
    expect(take()).toEqual(["reset:publisher-restarted", "replay#2 from 0"]);
    t.replayBatch(2, 0, p("new0"));
    t.replayEnd(2);
    expect(take()).toEqual(["replay:0:new0", "live:1:new1"]);
  });

  test("the last delivered batch no longer buffered: reset, then what is left", () => {
    const { t, take } = tracker({ replayAvailable: true });
    t.connected();
    t.replayEnd(1);
    t.live(0, p("b0"));
    take();
    t.connected();
    t.replayBatch(2, 5, p("b5"));
    t.replayEnd(2);
    expect(take()).toEqual(["replay#2 from 0", "cancel#2", "reset:replay-incomplete", "replay#3 from 0"]);
    t.replayBatch(3, 5, p("b5"));
    t.replayBatch(3, 6, p("b6"));
    t.replayEnd(3);
    expect(take()).toEqual(["replay:5:b5", "replay:6:b6"]);
  });

  test("a failed replay resets when there was state and carries on from the waiting live batches", () => {
    const { t, take } = tracker({ replayAvailable: true });
    t.connected();
    t.live(7, p("b7"));
    t.replayFailed(1);
    // Nothing delivered yet: nothing to drop.
    expect(take()).toEqual(["replay#1 from 0", "cancel#1", "live:7:b7"]);
    t.live(9, p("b9"));
    t.live(10, p("b10"));
    t.replayFailed(2);
    expect(take()).toEqual(["replay#2 from 7", "cancel#2", "reset:replay-failed", "live:9:b9", "live:10:b10"]);
  });

  test("too many live batches during a replay: overrun, they are dropped (not applied) and the next one starts afresh", () => {
    const { t, take } = tracker({ replayAvailable: true, maxPendingLive: 2 });
    t.connected();
    t.replayEnd(1);
    t.live(0, p("b0"));
    t.live(2, p("b2"));
    t.live(3, p("b3"));
    t.live(4, p("b4"));
    expect(take()).toEqual(["replay#1 from 0", "live:0:b0", "replay#2 from 0", "cancel#2", "reset:replay-overrun", "dropped:batches:3"]);
    expect(t.replaying).toBe(false);
    t.live(5, p("b5"));
    expect(take()).toEqual(["live:5:b5"]);
  });

  test("live batches waiting for a replay are bounded in bytes too: past the endpoint's or the gateway's budget they are dropped, the bytes given back", () => {
    const gateway = new KvByteBudget(1000);
    const endpoint = new KvByteBudget(100, gateway);
    const { t, take } = tracker({ replayAvailable: true, maxPendingLive: 1000, budget: endpoint });
    t.connected();
    t.replayEnd(1);
    t.live(0, p("b0"));
    const big = (seq: number) => p(`b${seq}`.padEnd(40, "."));
    t.live(2, big(2));
    t.live(3, big(3));
    expect(endpoint.used).toBe(80);
    t.live(4, big(4));
    expect(take()).toEqual(["replay#1 from 0", "live:0:b0", "replay#2 from 0", "cancel#2", "reset:replay-overrun", "dropped:endpoint-bytes:3"]);
    expect(endpoint.used).toBe(0);
    expect(gateway.used).toBe(0);
    // Another endpoint holds most of the gateway's budget: this one's next wait is refused by the gateway's bound.
    const other = new KvByteBudget(1000, gateway);
    expect(other.take(950)).toBeUndefined();
    t.live(5, p("b5"));
    t.live(7, big(7));
    t.live(8, big(8));
    expect(take()).toEqual(["live:5:b5", "replay#3 from 5", "cancel#3", "reset:replay-overrun", "dropped:gateway-bytes:2"]);
    expect(gateway.used).toBe(950);
  });

  test("answers to an abandoned replay are ignored; a replay out of order fails", () => {
    const { t, take } = tracker({ replayAvailable: true });
    t.connected();
    t.connected();
    t.replayBatch(1, 0, p("stale"));
    t.replayEnd(1);
    t.replayBatch(2, 1, p("b1"));
    t.replayBatch(2, 0, p("b0"));
    expect(take()).toEqual(["replay#1 from 0", "cancel#1", "replay#2 from 0", "replay:1:b1", "cancel#2", "reset:replay-failed"]);
  });

  test("replayed batches are delivered as they arrive, not held until the end", () => {
    const { t, take } = tracker({ replayAvailable: true });
    t.connected();
    t.replayBatch(1, 0, p("b0"));
    t.replayBatch(1, 1, p("b1"));
    expect(take()).toEqual(["replay#1 from 0", "replay:0:b0", "replay:1:b1"]);
    t.live(2, p("b2"));
    expect(take()).toEqual([]);
    t.replayEnd(1);
    expect(take()).toEqual(["live:2:b2"]);
  });

  test("a hole inside a replay fails it", () => {
    const { t, take } = tracker({ replayAvailable: true });
    t.connected();
    t.replayBatch(1, 0, p("b0"));
    t.replayBatch(1, 2, p("b2"));
    t.live(3, p("b3"));
    // After the reset the live stream is a fresh start.
    expect(take()).toEqual(["replay#1 from 0", "replay:0:b0", "cancel#1", "reset:replay-failed", "live:3:b3"]);
    t.live(4, p("b4"));
    expect(take()).toEqual(["live:4:b4"]);
  });

  test("a gap among the batches that waited starts another replay", () => {
    const { t, take } = tracker({ replayAvailable: true });
    t.connected();
    t.live(1, p("b1"));
    t.live(5, p("b5"));
    t.replayBatch(1, 0, p("b0"));
    t.replayBatch(1, 1, p("b1"));
    t.replayEnd(1);
    expect(take()).toEqual(["replay#1 from 0", "replay:0:b0", "replay:1:b1", "replay#2 from 1"]);
    for (const s of [1, 2, 3, 4, 5]) t.replayBatch(2, s, p(`b${s}`));
    t.replayEnd(2);
    expect(take()).toEqual(["replay:2:b2", "replay:3:b3", "replay:4:b4", "replay:5:b5"]);
  });
});
