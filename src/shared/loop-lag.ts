/**
 * Watches this thread's event loop. A timer meant to run every TICK_MS
 * notes how late it runs; a gap longer than STALL_MS is a stall (the loop
 * was blocked: a large parse, a synchronous write, GC), kept in a short ring.
 * The request path asks whether the loop stalled within a window before it
 * blames an engine for silence: bytes an engine sent while the loop was
 * blocked sit unread in the socket, so a deadline that fired then measured
 * the gateway, not the engine.
 *
 * Each stall says its cause, where Linux tells (thread-schedstat.ts): a
 * loop that was ready to run but waited for a CPU longer than the stall's
 * excess (a busy host: other processes had the cores) is `cpu_wait`; one
 * that was running or blocked in a call is the gateway's own. Elsewhere
 * every stall counts as the gateway's.
 */
import { type SchedCounters, ThreadSchedstat } from "./thread-schedstat.ts";

/** Why the loop stalled: its own work (or a blocking call), or waiting for a CPU the host did not give it. */
const STALL_CAUSES = ["gateway", "cpu_wait"] as const;
export type StallCause = (typeof STALL_CAUSES)[number];

const TICK_MS = 20;
/** A gap beyond the tick longer than this is a stall. */
export const STALL_MS = 50;
const RING = 64;

export class LoopLag {
  private timer: ReturnType<typeof setInterval> | undefined;
  private lastTick = performance.now();
  /** Stalls as (start, end) pairs, newest at `next - 1`. */
  private readonly ring = new Float64Array(RING * 2);
  private next = 0;
  private count = 0;
  private sched: { read(): SchedCounters | undefined } | undefined;
  /** The thread's run-queue wait at the last tick (ns), when known. */
  private lastWaitNs: number | undefined;
  /** Called with each stall's length in seconds and its cause (a metric). */
  onStall: ((seconds: number, cause: StallCause) => void) | undefined;

  /** `openSched`: this thread's scheduler counters (tests give their own). */
  constructor(private readonly openSched: () => { read(): SchedCounters | undefined } | undefined = () => ThreadSchedstat.open()) {}

  start(): void {
    if (this.timer) return;
    this.lastTick = performance.now();
    // Opened on the thread that starts the watch: the counters are this loop's.
    this.sched ??= this.openSched();
    this.lastWaitNs = this.sched?.read()?.waitNs;
    this.timer = setInterval(() => this.tick(), TICK_MS);
    this.timer.unref?.();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    const now = performance.now();
    const waitNs = this.sched?.read()?.waitNs;
    const waitedMs = waitNs !== undefined && this.lastWaitNs !== undefined ? (waitNs - this.lastWaitNs) / 1e6 : 0;
    this.note(this.lastTick, now, waitedMs);
    this.lastTick = now;
    this.lastWaitNs = waitNs;
  }

  private note(from: number, now: number, waitedMs: number): void {
    const late = now - from - TICK_MS;
    if (late < STALL_MS) return;
    const i = (this.next % RING) * 2;
    this.ring[i] = from + TICK_MS;
    this.ring[i + 1] = now;
    this.next++;
    this.count = Math.min(RING, this.count + 1);
    // Without the wait for a CPU, would the loop still have been late by a stall's length?
    this.onStall?.(late / 1000, late - waitedMs >= STALL_MS ? "gateway" : "cpu_wait");
  }

  /**
   * Milliseconds the loop was stalled within [from, to] (performance.now()
   * times), counting a stall the loop is only now coming out of (the tick
   * that would record it may not have run yet). 0 when not watching.
   */
  stalledWithin(from: number, to: number): number {
    if (!this.timer) return 0;
    let worst = 0;
    const overlap = (s: number, e: number) => Math.max(0, Math.min(e, to) - Math.max(s, from));
    for (let k = 0; k < this.count; k++) {
      const i = ((this.next - 1 - k + RING * 2) % RING) * 2;
      worst = Math.max(worst, overlap(this.ring[i]!, this.ring[i + 1]!));
    }
    // The current gap: no tick since lastTick + TICK_MS means the loop is blocked or just freed.
    if (to - this.lastTick - TICK_MS >= STALL_MS) worst = Math.max(worst, overlap(this.lastTick + TICK_MS, to));
    return worst;
  }
}

/** The main thread's watcher (started by the gateway). */
export const loopLag = new LoopLag();
