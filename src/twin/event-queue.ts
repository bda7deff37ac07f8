/**
 * The twin's virtual clock: a queue of callbacks by due time, run in time
 * order (ties in the order they were scheduled, so a run is the same on any
 * host). Time is simulated milliseconds from 0; nothing here reads a real
 * clock or sets a timer.
 *
 * A gateway module that awaits (a circuit's active probe) continues in a
 * promise callback, which JavaScript runs only once the current task ends:
 * the event that resolves such a promise calls `settle()`, `run` returns
 * after it, and the driver's `await` between runs lets the callbacks run at
 * that same simulated instant.
 */
import type { TimerHandle, Timers } from "../shared/timers.ts";

interface Due {
  at: number;
  seq: number;
  run: () => void;
}

export class EventQueue {
  /** The time of the event running now (or of the last one run). */
  now = 0;
  private readonly heap: Due[] = [];
  private seq = 0;
  /** Events run so far. */
  ran = 0;
  private settling = false;

  /** Run `run` at time `at` (never before now: a time in the past runs next, at now). */
  at(at: number, run: () => void): void {
    const due: Due = { at: at > this.now ? at : this.now, seq: this.seq++, run };
    const h = this.heap;
    h.push(due);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(due, h[parent]!)) break;
      h[i] = h[parent]!;
      i = parent;
    }
    h[i] = due;
  }

  after(ms: number, run: () => void): void {
    this.at(this.now + ms, run);
  }

  /** End the current `run` after this event: promise callbacks it caused then run before the clock moves on. */
  settle(): void {
    this.settling = true;
  }

  /** One-shot timers on this clock, for a module that takes `Timers`. */
  timers(): Timers {
    return {
      set: (run, ms) => {
        const handle = { cleared: false };
        this.after(ms, () => {
          if (!handle.cleared) run();
        });
        return handle;
      },
      clear: (handle: TimerHandle | undefined) => {
        if (handle !== undefined) (handle as { cleared: boolean }).cleared = true;
      },
    };
  }

  get size(): number {
    return this.heap.length;
  }

  /** When the next event is due; Infinity when none is. */
  nextAt(): number {
    return this.heap[0]?.at ?? Infinity;
  }

  /**
   * Run events in time order until none is left, the next is due after
   * `until`, or `stop()` says so (checked between events). Returns the
   * number run.
   */
  run(until = Infinity, stop: () => boolean = () => false): number {
    let n = 0;
    while (this.heap.length > 0 && this.heap[0]!.at <= until && !stop()) {
      const due = this.pop();
      this.now = due.at;
      due.run();
      n++;
      if (this.settling) {
        this.settling = false;
        break;
      }
    }
    this.ran += n;
    return n;
  }

  private pop(): Due {
    const h = this.heap;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= h.length) break;
        const r = l + 1;
        const c = r < h.length && before(h[r]!, h[l]!) ? r : l;
        if (!before(h[c]!, last)) break;
        h[i] = h[c]!;
        i = c;
      }
      h[i] = last;
    }
    return top;
  }
}

function before(a: Due, b: Due): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}
