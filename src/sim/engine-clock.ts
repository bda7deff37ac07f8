/**
 * How well the served engine keeps its own schedule on this host. The engine
 * runs on one timer, set for its next event (a step's end, a request reaching
 * the scheduler, a paced token); each callback runs at or after that time.
 * How late it runs is the host's doing (a CPU the sim waited for, a GC pause
 * of its own): that step's tokens go out that much late. When a step's end
 * is noticed only after the next step would have ended as well, the next step
 * starts when noticed, and the whole schedule slips by the difference: the
 * engine then serves fewer tokens a second than the GPU it models. A bench
 * reads both (engine-clock-report.ts) so that a verdict never comes silently
 * from a starved host. Both are wall-clock times.
 */
import { Histogram } from "./histogram.ts";

/** Upper bounds of the lateness histogram, seconds: from timer granularity (~0.5 ms) to a stalled process. */
const CLOCK_LATE_BUCKETS_S = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10];

export class EngineClock {
  /** How late each timer callback ran, seconds. */
  readonly late = new Histogram(CLOCK_LATE_BUCKETS_S);
  maxLateMs = 0;
  /** Wall ms by which the engine's schedule slipped in all. */
  slippedMs = 0;

  noteLate(ms: number): void {
    const v = Math.max(0, ms);
    this.late.observe(v / 1000);
    if (v > this.maxLateMs) this.maxLateMs = v;
  }

  noteSlip(ms: number): void {
    if (ms > 0) this.slippedMs += ms;
  }

  /** For /sim/state: callbacks timed, the p99 lateness's bucket bound (ms), the worst, and the slip. */
  view(): { timers: number; late_p99_ms_at_most: number; late_max_ms: number; slipped_ms: number } {
    const cum = this.late.cumulative();
    const total = cum.at(-1) ?? 0;
    const bounds = this.late.bounds;
    let i = 0;
    while (i < bounds.length && cum[i]! < 0.99 * total) i++;
    const p99 = total === 0 ? 0 : i < bounds.length ? bounds[i]! * 1000 : this.maxLateMs;
    return { timers: total, late_p99_ms_at_most: p99, late_max_ms: round2(this.maxLateMs), slipped_ms: round2(this.slippedMs) };
  }
}

const round2 = (x: number) => Math.round(x * 100) / 100;
