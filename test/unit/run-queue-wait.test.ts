/** Run-queue waits read from Linux's schedstat: a number for a live thread, undefined (NaN) for what the kernel does not report. */
import { describe, expect, test } from "bun:test";
import { RunQueueWatch, runQueueMs } from "../../src/bench/run-queue-wait.ts";

describe("run-queue waits", () => {
  test("this process's main thread has a wait that only grows; a watch reports the longest wait since its mark", () => {
    const a = runQueueMs(process.pid)!;
    expect(a).toBeGreaterThanOrEqual(0);
    const watch = new RunQueueWatch([process.pid, process.pid]);
    expect(watch.available).toBe(true);
    const mark = watch.mark();
    let x = 0;
    for (let i = 0; i < 2e6; i++) x += i;
    expect(x).toBeGreaterThan(0);
    const waited = watch.waitedSince(mark);
    expect(waited).toBeGreaterThanOrEqual(0);
    expect(runQueueMs(process.pid)!).toBeGreaterThanOrEqual(a);
  });

  test("a process that does not exist: unknown, never 0", () => {
    expect(runQueueMs(2 ** 30)).toBeUndefined();
    const watch = new RunQueueWatch([2 ** 30]);
    expect(watch.available).toBe(false);
    expect(watch.waitedSince(watch.mark())).toBeNaN();
  });
});
