/**
 * When the simulated GPU was busy, for DCGM's utilisation: the fraction of
 * a recent window in which a step ran, as NVML's GPU utilisation is "the
 * percent of time over the past sample period during which one or more
 * kernels was executing". Back-to-back steps form one busy interval, also
 * when a late timer started the next step a little after the last one ended.
 */

/** Gaps shorter than this between steps are the driver's timer, not an idle GPU (simulated ms). */
const MERGE_GAP_MS = 5;
const KEEP_MS = 10_000;

export class BusyTracker {
  /** Closed busy intervals, oldest first: [start, end, start, end, …]. */
  private spans: number[] = [];
  private openStart = NaN;
  private openEnd = NaN;

  /** A step runs from `start` to `end`. */
  busy(start: number, end: number): void {
    if (!Number.isNaN(this.openStart) && start <= this.openEnd + MERGE_GAP_MS) {
      this.openEnd = Math.max(this.openEnd, end);
      return;
    }
    this.close();
    this.openStart = start;
    this.openEnd = end;
  }

  /** Nothing to run at `at`. */
  idle(at: number): void {
    if (!Number.isNaN(this.openStart) && at > this.openEnd + MERGE_GAP_MS) this.close();
  }

  /** Busy fraction of [now - windowMs, now], 0..1. */
  utilization(now: number, windowMs: number): number {
    const from = now - windowMs;
    let busy = 0;
    const overlap = (a: number, b: number) => Math.max(0, Math.min(b, now) - Math.max(a, from));
    for (let i = 0; i < this.spans.length; i += 2) busy += overlap(this.spans[i]!, this.spans[i + 1]!);
    if (!Number.isNaN(this.openStart)) busy += overlap(this.openStart, this.openEnd);
    return windowMs > 0 ? Math.min(1, busy / windowMs) : 0;
  }

  private close(): void {
    if (Number.isNaN(this.openStart)) return;
    this.spans.push(this.openStart, this.openEnd);
    this.openStart = NaN;
    this.openEnd = NaN;
    const cutoff = this.spans[this.spans.length - 1]! - KEEP_MS;
    let drop = 0;
    while (drop < this.spans.length && this.spans[drop + 1]! < cutoff) drop += 2;
    if (drop > 0) this.spans.splice(0, drop);
  }
}
