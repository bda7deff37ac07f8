/**
 * How long processes waited for a CPU: the second field of Linux's
 * /proc/<pid>/task/<tid>/schedstat, the time a thread spent runnable on a run
 * queue without running. On a shared machine a latency tail is often just
 * that — a gateway's event loop measured 834–1457 ms stalls under a load
 * average of 12 on 2 cores, of which 32–82 ms on a CPU and the rest waiting
 * for one — which says nothing about the gateway. Benchmarks and tests that
 * judge a tail use it to set apart the samples the machine delayed.
 * Read-only, a file read per process per call; undefined where the kernel
 * does not keep schedstat (not Linux, or built without it).
 */
import { readdirSync, readFileSync } from "node:fs";

/** Milliseconds thread `tid` of `pid` (its main thread by default) has waited on a run queue since it started; undefined when unknown. */
export function runQueueMs(pid: number, tid: number = pid): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").trim().split(/\s+/);
    const ns = Number(fields[1]);
    return Number.isFinite(ns) ? ns / 1e6 : undefined;
  } catch {
    return undefined;
  }
}

/** The thread ids of process `pid` (its main thread alone where /proc cannot say). */
export function threadsOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`)
      .map(Number)
      .filter((tid) => Number.isInteger(tid));
  } catch {
    return [pid];
  }
}

/** A process's main thread (a pid), or one thread of it. */
type WatchedThread = number | { pid: number; tid: number };

/**
 * The run-queue waits of some threads, read together: processes' main threads
 * by default, or named threads — a client whose HTTP work runs on a thread of
 * its own (Bun's fetch) waits there too.
 */
export class RunQueueWatch {
  constructor(private readonly threads: readonly WatchedThread[]) {}

  /** Whether the kernel reports run-queue waits here (for the first thread). */
  get available(): boolean {
    return this.threads.length > 0 && this.mark()[0] !== undefined && !Number.isNaN(this.mark()[0]!);
  }

  /** Each thread's wait so far (NaN where unknown). */
  mark(): number[] {
    return this.threads.map((t) => (typeof t === "number" ? runQueueMs(t) : runQueueMs(t.pid, t.tid)) ?? Number.NaN);
  }

  /**
   * The longest any of the threads (those at `only`, if given) waited for
   * a CPU since `mark`, ms; NaN when unknown. The longest, not the sum: a
   * wait counts against a request only while the request was at that
   * thread, which the sum would assume of every thread at once.
   */
  waitedSince(mark: readonly number[], only?: readonly number[]): number {
    const now = this.mark();
    let longest = 0;
    for (const i of only ?? now.keys()) longest = Math.max(longest, now[i]! - mark[i]!);
    return longest;
  }
}
