/**
 * The calling thread's scheduler counters from Linux's
 * /proc/thread-self/schedstat: nanoseconds it ran on a CPU, and nanoseconds
 * it was ready to run but waited for one (the run queue). Kept open and
 * re-read from offset 0 (one pread, ~5 µs). The wait is what tells a thread
 * that was busy or blocked apart from one that a busy host did not run.
 */
import { closeSync, openSync, readSync } from "node:fs";

export interface SchedCounters {
  runNs: number;
  waitNs: number;
}

export class ThreadSchedstat {
  readonly #fd: number;
  readonly #buf = Buffer.alloc(96);

  private constructor(fd: number) {
    this.#fd = fd;
  }

  /** The calling thread's counters, or undefined where there are none (not Linux, no /proc, schedstats off). */
  static open(): ThreadSchedstat | undefined {
    let fd: number;
    try {
      fd = openSync("/proc/thread-self/schedstat", "r");
    } catch {
      return undefined;
    }
    const s = new ThreadSchedstat(fd);
    if (s.read() !== undefined) return s;
    s.close();
    return undefined;
  }

  read(): SchedCounters | undefined {
    let n: number;
    try {
      n = readSync(this.#fd, this.#buf, 0, this.#buf.length, 0);
    } catch {
      return undefined;
    }
    // "<run ns> <wait ns> <timeslices>\n"
    const text = this.#buf.toString("latin1", 0, n);
    const sp = text.indexOf(" ");
    const runNs = Number(text.slice(0, sp));
    const waitNs = Number(text.slice(sp + 1, text.indexOf(" ", sp + 1)));
    return sp > 0 && Number.isFinite(runNs) && Number.isFinite(waitNs) ? { runNs, waitNs } : undefined;
  }

  close(): void {
    try {
      closeSync(this.#fd);
    } catch {
      // already closed
    }
  }
}
