/**
 * Probes a URL every 20 ms from its own process until stopped, and reports
 * the slowest answers: a measurement the test process's own busy event loop
 * cannot inflate. On a shared machine the server (or this prober) may wait
 * for a CPU in the middle of a probe — a stall that says nothing about the
 * server — so each probe also records how long the server's main thread and
 * this process's threads waited on a run queue meanwhile (the longest), and
 * its latency net of that wait is reported beside the raw one.
 *
 * As a module: startLatencyProber(url, serverPid) → stop() resolves with the
 * slowest raw and net latencies (descending), the worst and median in ms and
 * the probe count. As a script: probes argv[2] (server pid argv[3]) until a
 * line arrives on stdin (or stdin closes).
 */
import { RunQueueWatch, threadsOf } from "../../src/bench/run-queue-wait.ts";
import { childEnv } from "../../src/shared/process-env.ts";

export interface LatencySummary {
  /** The five slowest probes, slowest first (ms). */
  slowestMs: number[];
  /** The five slowest probes net of the time the server or the prober waited for a CPU meanwhile (the raw ones where the kernel does not say). */
  slowestNetMs: number[];
  worstMs: number;
  medianMs: number;
  probes: number;
  failures: number;
}

export function startLatencyProber(url: string, serverPid: number): { stop(): Promise<LatencySummary> } {
  const proc = Bun.spawn([process.execPath, import.meta.path, url, String(serverPid)], { env: childEnv(), stdin: "pipe", stdout: "pipe", stderr: "inherit" });
  const out = new Response(proc.stdout).text();
  return {
    async stop() {
      proc.stdin.write("stop\n");
      await proc.stdin.end();
      await proc.exited;
      return JSON.parse((await out).trim()) as LatencySummary;
    },
  };
}

if (import.meta.main) {
  const url = process.argv[2]!;
  // One probe first, uncounted: Bun starts its HTTP client thread with the first fetch.
  await fetch(url).then(
    (r) => r.arrayBuffer(),
    () => undefined,
  );
  // The server's main thread, and every thread of this prober: Bun's fetch does its HTTP work on a thread of its own.
  const watch = new RunQueueWatch([Number(process.argv[3]), ...threadsOf(process.pid).map((tid) => ({ pid: process.pid, tid }))]);
  let running = true;
  void (async () => {
    for await (const _ of Bun.stdin.stream()) break;
    running = false;
  })();
  const times: number[] = [];
  const nets: number[] = [];
  let failures = 0;
  while (running) {
    const mark = watch.mark();
    const t0 = performance.now();
    try {
      if ((await fetch(url)).status !== 200) failures++;
    } catch {
      failures++;
    }
    const ms = performance.now() - t0;
    const waited = watch.waitedSince(mark);
    times.push(ms);
    nets.push(Number.isNaN(waited) ? ms : Math.max(0, ms - waited));
    await Bun.sleep(20);
  }
  const slowest = (xs: number[]) => [...xs].sort((a, b) => b - a).slice(0, 5);
  times.sort((a, b) => a - b);
  const summary: LatencySummary = {
    slowestMs: slowest(times),
    slowestNetMs: slowest(nets),
    worstMs: times.at(-1) ?? 0,
    medianMs: times[times.length >> 1] ?? 0,
    probes: times.length,
    failures,
  };
  console.log(JSON.stringify(summary));
  process.exit(0);
}
