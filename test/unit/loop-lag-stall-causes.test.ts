/** A stall of the loop says whether the gateway was busy (or blocked) or only waited for a CPU the host did not give it. */
import { describe, expect, test } from "bun:test";
import { LoopLag, type StallCause } from "../../src/shared/loop-lag.ts";
import { ThreadSchedstat } from "../../src/shared/thread-schedstat.ts";

function watch(lag: LoopLag): { stalls: { seconds: number; cause: StallCause }[] } {
  const seen: { seconds: number; cause: StallCause }[] = [];
  lag.onStall = (seconds, cause) => seen.push({ seconds, cause });
  lag.start();
  return { stalls: seen };
}

/** Keep the loop busy until `ms` of wall time have passed. */
function blockWall(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // the loop is stalled
  }
}

describe("stall causes", () => {
  test("a stall the thread spent waiting for a CPU is cpu_wait; one it spent running is the gateway's", async () => {
    let waitNs = 0;
    const lag = new LoopLag(() => ({ read: () => ({ runNs: 0, waitNs }) }));
    const { stalls } = watch(lag);
    try {
      await Bun.sleep(60);
      blockWall(200);
      waitNs += 1e9; // the counters say the thread waited for a CPU all along
      await Bun.sleep(60);
      blockWall(200);
      waitNs += 20e6; // 20 ms of waiting do not explain a 200 ms stall
      await Bun.sleep(60);
    } finally {
      lag.stop();
    }
    // (A shorter stall of a busy test machine may come on top: only the two made here are looked at.)
    expect(stalls.filter((s) => s.seconds >= 0.15).map((s) => s.cause)).toEqual(["cpu_wait", "gateway"]);
  });

  test("without scheduler counters every stall is the gateway's", async () => {
    const lag = new LoopLag(() => undefined);
    const { stalls } = watch(lag);
    try {
      await Bun.sleep(60);
      blockWall(150);
      await Bun.sleep(60);
    } finally {
      lag.stop();
    }
    expect(stalls.filter((s) => s.seconds >= 0.1).map((s) => s.cause)).toEqual(["gateway"]);
  });

  test("on Linux, 200 ms of the loop's own work is a gateway stall, however busy the host", async () => {
    const sched = ThreadSchedstat.open();
    if (sched === undefined) {
      console.log("no /proc/thread-self/schedstat here: the real counters are not checked");
      return;
    }
    const lag = new LoopLag();
    const { stalls } = watch(lag);
    try {
      await Bun.sleep(60);
      // 200 ms on the CPU (not of wall time: a busy host may take the CPU away in between, and that wait is not ours).
      const until = sched.read()!.runNs + 200e6;
      while (sched.read()!.runNs < until) blockWall(1);
      await Bun.sleep(60);
    } finally {
      lag.stop();
      sched.close();
    }
    const ours = stalls.filter((s) => s.cause === "gateway" && s.seconds >= 0.15);
    expect(ours.length).toBe(1);
  });
});
