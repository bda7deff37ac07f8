/**
 * Keeps a subscriber's view of one publisher's batch stream whole: every
 * batch delivered once, in sequence order, or the consumer told that its
 * state must be dropped. Pure: the subscriber feeds it what the sockets
 * report and carries out the effects it asks for.
 *
 * - A gap in the live sequence, or a new connection, starts a replay from the
 *   last delivered sequence. Replayed batches are delivered as they arrive;
 *   live ones wait until the replay ends (bounded), so nothing unbounded is
 *   held whatever the publisher's buffer size.
 * - Continuity is proven, not assumed: the replay is asked to start *at* the
 *   last delivered batch, and its payload must equal the one delivered. A
 *   publisher that restarted counts from 0 again and, once past our last
 *   sequence, would otherwise look seamless; its batch at that sequence
 *   differs (vLLM stamps each with the time), so a restart is caught.
 * - Live batches waiting for a replay are bounded in count and in bytes (a
 *   KvByteBudget: the endpoint's and the gateway's): past either, the replay
 *   is abandoned, the waiting batches are dropped (counted by the bound that
 *   was reached), the state reset, and the next live batch starts afresh.
 *   Holding them would let a publisher that trickles its replay and floods
 *   its live socket grow the gateway without end.
 * - Restart detected (payload differs, or the live sequence went back): reset,
 *   then a replay from 0 for the new publisher's history.
 * - The last delivered batch no longer buffered: reset, then a replay from 0
 *   for what the publisher still has.
 * - A replay that times out, fails, or has a hole or a sequence out of
 *   order, or a gap with no replay socket:
 *   reset, and carry on from the live stream.
 * - Without state (first connection, or after a reset) there is nothing to
 *   prove: a fresh start asks for the whole buffer (from 0) once.
 */

export type ResetReason =
  /** The publisher's sequence restarted (a new engine process): its blocks are not the ones indexed. */
  | "publisher-restarted"
  /** The batches after the last one delivered are no longer in the publisher's replay buffer. */
  | "replay-incomplete"
  /** The replay request timed out, could not connect, or got a malformed answer. */
  | "replay-failed"
  /** Too many live batches (in count or bytes) arrived while a replay was in flight. */
  | "replay-overrun"
  /** The consumer could not take the batches as fast as they came (its byte budget ran out): they were dropped. */
  | "apply-overrun"
  /** A gap or a reconnection, and no replay endpoint to fill it from. */
  | "no-replay-endpoint";

export type DeliverySource = "live" | "replay";

import type { KvBatchDropBound } from "../../shared/kv-event-stats.ts";
import { KvByteBudget } from "./byte-budget.ts";

interface TrackerEffects {
  deliver(seq: number, payload: Uint8Array, source: DeliverySource): void;
  /** Ask the replay socket for every batch from `fromSeq`; report back with `id`. */
  requestReplay(id: number, fromSeq: number): void;
  /** Abandon replay `id` (a newer one replaces it, or it failed). */
  cancelReplay(id: number): void;
  /** The consumer must drop everything it built from this stream. */
  reset(reason: ResetReason): void;
  /** Received batches dropped unapplied, and the bound that made them go. */
  dropped(bound: KvBatchDropBound, batches: number): void;
}

interface Applied {
  seq: number;
  payload: Uint8Array;
}

interface Replay {
  id: number;
  /** The batch the replay must begin with, until its first batch has been checked against it. */
  anchor: Applied | undefined;
  /** The last sequence this replay brought, to refuse one out of order. */
  lastSeq: number | undefined;
  /** Live batches that arrived meanwhile, and their bytes (taken from the budget). */
  pending: Applied[];
  pendingBytes: number;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.length).equals(Buffer.from(b.buffer, b.byteOffset, b.length));
}

export class SequenceTracker {
  private applied: Applied | undefined;
  private replay: Replay | undefined;
  private nextReplayId = 1;

  private readonly budget: KvByteBudget;

  /** `budget`: the bytes live batches may take while a replay is in flight (default: no bound but `maxPendingLive`). */
  constructor(
    private readonly effects: TrackerEffects,
    private readonly options: { replayAvailable: boolean; maxPendingLive: number; budget?: KvByteBudget },
  ) {
    this.budget = options.budget ?? new KvByteBudget(Number.POSITIVE_INFINITY);
  }

  /** The last sequence delivered since the last reset, if any. */
  get lastSequence(): number | undefined {
    return this.applied?.seq;
  }

  get replaying(): boolean {
    return this.replay !== undefined;
  }

  /**
   * A (new) connection to the publisher is up. Live batches still waiting
   * from the old connection are dropped: if the publisher is the same, the
   * replay brings them again; if it restarted, they are the old one's.
   */
  connected(): void {
    this.cancelCurrentReplay();
    if (!this.options.replayAvailable) {
      if (this.applied !== undefined) this.resetState("no-replay-endpoint");
      return;
    }
    this.startReplay(this.applied, []);
  }

  live(seq: number, payload: Uint8Array): void {
    const batch = { seq, payload };
    const r = this.replay;
    if (r !== undefined) {
      const refused = r.pending.length >= this.options.maxPendingLive ? "batches" : this.budget.take(payload.length);
      if (refused !== undefined) {
        this.overrun(r, refused);
        return;
      }
      r.pending.push(batch);
      r.pendingBytes += payload.length;
      return;
    }
    const last = this.applied;
    if (last === undefined || seq === last.seq + 1) {
      this.apply(batch, "live");
      return;
    }
    if (seq <= last.seq) {
      this.resetState("publisher-restarted");
      if (this.options.replayAvailable) this.startReplay(undefined, [batch]);
      else this.apply(batch, "live");
      return;
    }
    if (this.options.replayAvailable) this.startReplay(last, [batch]);
    else {
      this.resetState("no-replay-endpoint");
      this.apply(batch, "live");
    }
  }

  /** A replayed batch: checked against the anchor if it is the first, otherwise delivered at once (nothing is held but live batches). */
  replayBatch(id: number, seq: number, payload: Uint8Array): void {
    const r = this.replay;
    if (r === undefined || r.id !== id) return;
    if (r.lastSeq !== undefined && seq <= r.lastSeq) {
      this.failReplay(id, "replay-failed");
      return;
    }
    r.lastSeq = seq;
    const anchor = r.anchor;
    if (anchor !== undefined) {
      r.anchor = undefined;
      // The anchor gone (evicted, or a restarted publisher not yet that far)
      // or different (a restarted publisher past it): batches were missed.
      if (seq !== anchor.seq) this.restartFromZero(r, "replay-incomplete");
      else if (!sameBytes(payload, anchor.payload)) this.restartFromZero(r, "publisher-restarted");
      return;
    }
    const last = this.applied;
    if (last !== undefined && seq !== last.seq + 1) {
      // A hole inside a replay: vLLM's buffer is contiguous, so this is not vLLM.
      this.failReplay(id, "replay-failed");
      return;
    }
    this.apply({ seq, payload }, "replay");
  }

  replayEnd(id: number): void {
    const r = this.replay;
    if (r === undefined || r.id !== id) return;
    if (r.anchor !== undefined) {
      // Nothing at all from the anchor on.
      this.restartFromZero(r, "replay-incomplete");
      return;
    }
    this.replay = undefined;
    this.drainPending(this.release(r));
  }

  /**
   * The consumer dropped batches it had been handed (it could not keep up):
   * forget the state, abandon any replay (its waiting batches are dropped
   * too; their count is returned), and start afresh from the next live batch.
   */
  abandon(reason: ResetReason): number {
    const r = this.replay;
    let dropped = 0;
    if (r !== undefined) {
      this.replay = undefined;
      this.effects.cancelReplay(r.id);
      dropped = this.release(r).length;
    }
    this.resetState(reason);
    return dropped;
  }

  replayFailed(id: number): void {
    this.failReplay(id, "replay-failed");
  }

  /** The subscriber closed: give back what a replay held, tell no one. */
  abandonQuietly(): void {
    const r = this.replay;
    if (r === undefined) return;
    this.replay = undefined;
    this.release(r);
  }

  private failReplay(id: number, reason: ResetReason): void {
    const r = this.replay;
    if (r === undefined || r.id !== id) return;
    this.replay = undefined;
    this.effects.cancelReplay(id);
    this.failedWith(reason, this.release(r));
  }

  /** Too much waiting for the replay: drop it all (the batch that did not fit too), reset, and start afresh from the next live batch. */
  private overrun(r: Replay, bound: KvBatchDropBound): void {
    this.replay = undefined;
    this.effects.cancelReplay(r.id);
    const dropped = this.release(r).length + 1;
    if (this.applied !== undefined) this.resetState("replay-overrun");
    this.effects.dropped(bound, dropped);
  }

  /** The replay's waiting batches, their bytes given back to the budget. */
  private release(r: Replay): Applied[] {
    this.budget.give(r.pendingBytes);
    r.pendingBytes = 0;
    return r.pending.splice(0);
  }

  /** Give up on proving continuity: reset if there was state, then carry on from the live batches, the first taken as a fresh start. */
  private failedWith(reason: ResetReason, pending: Applied[]): void {
    if (this.applied !== undefined) this.resetState(reason);
    const [first, ...rest] = pending;
    if (first === undefined) return;
    this.apply(first, "live");
    this.drainPending(rest);
  }

  /** Live batches that waited for a replay, in arrival order: those the replay covered are skipped, the rest go through `live` (which may start another replay, and then they wait again). */
  private drainPending(pending: Applied[]): void {
    for (const p of pending) {
      // Same connection, same publisher: a sequence at or below the last
      // delivered one was delivered by the replay. (During a new replay, live() holds it again.)
      if (this.replay === undefined && this.applied !== undefined && p.seq <= this.applied.seq) continue;
      this.live(p.seq, p.payload);
    }
  }

  /** Start a replay; `pending` are live batches to hold meanwhile (their bytes already taken when `pendingBytes` says so). */
  private startReplay(anchor: Applied | undefined, pending: Applied[], pendingBytes = 0): void {
    const id = this.nextReplayId++;
    this.replay = { id, anchor, lastSeq: undefined, pending: [], pendingBytes };
    if (pendingBytes > 0) {
      this.replay.pending = pending;
      this.effects.requestReplay(id, anchor?.seq ?? 0);
      return;
    }
    this.effects.requestReplay(id, anchor?.seq ?? 0);
    // The batch that revealed the gap waits like any other live one.
    for (const p of pending) if (this.replay?.id === id) this.live(p.seq, p.payload);
  }

  /** Continuity is lost: abandon this replay, reset, and fetch the publisher's whole buffer. */
  private restartFromZero(r: Replay, reason: ResetReason): void {
    this.replay = undefined;
    this.effects.cancelReplay(r.id);
    this.resetState(reason);
    this.startReplay(undefined, r.pending, r.pendingBytes);
  }

  private cancelCurrentReplay(): void {
    const r = this.replay;
    if (r === undefined) return;
    this.replay = undefined;
    this.effects.cancelReplay(r.id);
    this.release(r);
  }

  private apply(batch: Applied, source: DeliverySource): void {
    this.applied = batch;
    this.effects.deliver(batch.seq, batch.payload, source);
  }

  private resetState(reason: ResetReason): void {
    this.applied = undefined;
    this.effects.reset(reason);
  }
}
