/**
 * Probes a URL every 20 ms from its own process until stopped, and reports
 * the slowest answer: a measurement the test process's own busy event loop
 * cannot inflate.
 *
 * As a module: startLatencyProber(url) → stop() resolves with the worst and
 * median latency in ms and the probe count. As a script: probes argv[2] until
 * a line arrives on stdin (or stdin closes).
 */
import { childEnv } from "../../src/shared/process-env.ts";

export interface LatencySummary {
  worstMs: number;
  medianMs: number;
  probes: number;
  failures: number;
}

export function startLatencyProber(url: string): { stop(): Promise<LatencySummary> } {
  const proc = Bun.spawn([process.execPath, import.meta.path, url], { env: childEnv(), stdin: "pipe", stdout: "pipe", stderr: "inherit" });
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
  let running = true;
  void (async () => {
    for await (const _ of Bun.stdin.stream()) break;
    running = false;
  })();
  const times: number[] = [];
  let failures = 0;
  while (running) {
    const t0 = performance.now();
    try {
      if ((await fetch(url)).status !== 200) failures++;
    } catch {
      failures++;
    }
    times.push(performance.now() - t0);
    await Bun.sleep(20);
  }
  times.sort((a, b) => a - b);
  const summary: LatencySummary = { worstMs: times.at(-1) ?? 0, medianMs: times[times.length >> 1] ?? 0, probes: times.length, failures };
  console.log(JSON.stringify(summary));
  process.exit(0);
}
