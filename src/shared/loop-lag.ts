/**
 * Watches this thread's event loop. A timer meant to run every TICK_MS
 * notes how late it runs; a gap longer than STALL_MS is a stall (the loop
 * was blocked: a large parse, a synchronous write, GC), kept in a short ring.
 * The request path asks whether the loop stalled within a window before it
 * blames an engine for silence: bytes an engine sent while the loop was
 * blocked sit unread in the socket, so a deadline that fired then measured
 * the gateway, not the engine.
 */

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
  /** Called with each stall's length in seconds (a metric). */
  onStall: ((seconds: number) => void) | undefined;

  start(): void {
    if (this.timer) return;
    this.lastTick = performance.now();
    this.timer = setInterval(() => this.tick(), TICK_MS);
    this.timer.unref?.();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    const now = performance.now();
    this.note(this.lastTick, now);
    this.lastTick = now;
  }

  private note(from: number, now: number): void {
    const late = now - from - TICK_MS;
    if (late < STALL_MS) return;
    const i = (this.next % RING) * 2;
    this.ring[i] = from + TICK_MS;
    this.ring[i + 1] = now;
    this.next++;
    this.count = Math.min(RING, this.count + 1);
    this.onStall?.(late / 1000);
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
