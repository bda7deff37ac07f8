/**
 * Side-by-side measurement of several ways to reach the same engines (direct,
 * a native proxy, a bare Bun proxy, llmgw …): closed-loop streaming clients
 * run against each path in turn, in interleaved rounds whose order rotates,
 * so machine noise falls on every path alike. Per path: client-side TTFT and
 * inter-token gaps, requests per second, errors, the CPU the proxy process
 * spent per request (its main thread and in all), and for llmgw the messages
 * its main thread posted to the scheduler worker per request.
 */
import { type CpuSample, cpuDelta, cpuSample } from "./proc-cpu.ts";
import { median, quantile } from "./report.ts";
import { type StreamTiming, timedStream } from "./stream-client.ts";

export interface BenchPath {
  name: string;
  /** The URL of the i-th request. */
  url: (i: number) => string;
  headers?: Record<string, string>;
  /** The proxy's process, for CPU figures (none for direct). */
  pid?: number;
  /** An llmgw admin listener, for the scheduler-message count. */
  adminUrl?: string;
}

interface CaseSpec {
  concurrency: number;
  /** Requests per path per round (spread over the concurrent clients). */
  requestsPerRound: number;
  rounds: number;
  /** The request body, or the i-th request's (the same i for every path). */
  body: string | ((i: number) => string);
}

export interface PathResult {
  requests: number;
  errors: number;
  ttft_p50_ms: number;
  ttft_p99_ms: number;
  itl_p50_ms: number;
  itl_p99_ms: number;
  rps: number;
  /** Main-thread / whole-process CPU per request, µs (null where not measured). */
  main_cpu_us_per_req: number | null;
  cpu_us_per_req: number | null;
  /** postMessage calls to the scheduler worker per request (llmgw only). */
  scheduler_messages_per_req: number | null;
}

interface Acc {
  ttft: number[];
  gaps: number[];
  rps: number[];
  errors: number;
  requests: number;
  cpu: CpuSample;
  cpuMeasured: boolean;
}

async function round(path: BenchPath, spec: CaseSpec): Promise<{ timings: StreamTiming[]; seconds: number }> {
  const timings: StreamTiming[] = [];
  const perWorker = Math.max(1, Math.round(spec.requestsPerRound / spec.concurrency));
  let seq = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: spec.concurrency }, async () => {
      for (let k = 0; k < perWorker; k++) {
        const i = seq++;
        timings.push(await timedStream(path.url(i), typeof spec.body === "string" ? spec.body : spec.body(i), path.headers ? { headers: path.headers } : {}));
      }
    }),
  );
  return { timings, seconds: (performance.now() - start) / 1000 };
}

/** Messages posted to the scheduler worker for requests (admit + release + cancel), from llmgw's own counter. */
async function schedulerMessages(adminUrl: string): Promise<number> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  let n = 0;
  for (const line of text.split("\n")) {
    const m = /^llmgw_scheduler_messages_total\{kind="(admit|release|cancel)"\} (\S+)/.exec(line);
    if (m) n += Number(m[2]);
  }
  return n;
}

export async function comparePaths(paths: readonly BenchPath[], spec: CaseSpec): Promise<Record<string, PathResult>> {
  const acc = new Map<string, Acc>(
    paths.map((p) => [p.name, { ttft: [], gaps: [], rps: [], errors: 0, requests: 0, cpu: { mainNs: 0, totalNs: 0 }, cpuMeasured: p.pid !== undefined }]),
  );
  // Warm-up: connection pools and JIT on every path.
  for (const p of paths) await round(p, { ...spec, requestsPerRound: Math.min(spec.concurrency, 50) * 2 });
  const messagesBefore = new Map<string, number>();
  for (const p of paths) if (p.adminUrl) messagesBefore.set(p.name, await schedulerMessages(p.adminUrl));
  for (let r = 0; r < spec.rounds; r++) {
    // Rotate the order so no path always runs first (or last) in a round.
    for (let k = 0; k < paths.length; k++) {
      const p = paths[(k + r) % paths.length]!;
      const a = acc.get(p.name)!;
      const before = p.pid === undefined ? undefined : cpuSample(p.pid);
      const { timings, seconds } = await round(p, spec);
      const spent = p.pid === undefined ? undefined : cpuDelta(before, cpuSample(p.pid));
      if (spent) {
        a.cpu.mainNs += spent.mainNs;
        a.cpu.totalNs += spent.totalNs;
      } else a.cpuMeasured = false;
      for (const t of timings) {
        a.requests++;
        if (!t.ok) {
          a.errors++;
          continue;
        }
        a.ttft.push(t.ttftMs);
        for (const g of t.gapsMs) a.gaps.push(g);
      }
      a.rps.push(timings.length / seconds);
    }
  }
  const out: Record<string, PathResult> = {};
  for (const p of paths) {
    const a = acc.get(p.name)!;
    const messages = p.adminUrl ? (await schedulerMessages(p.adminUrl)) - (messagesBefore.get(p.name) ?? 0) : undefined;
    out[p.name] = {
      requests: a.requests,
      errors: a.errors,
      ttft_p50_ms: quantile(a.ttft, 0.5),
      ttft_p99_ms: quantile(a.ttft, 0.99),
      itl_p50_ms: quantile(a.gaps, 0.5),
      itl_p99_ms: quantile(a.gaps, 0.99),
      rps: median(a.rps),
      main_cpu_us_per_req: a.cpuMeasured && a.requests > 0 ? a.cpu.mainNs / 1000 / a.requests : null,
      cpu_us_per_req: a.cpuMeasured && a.requests > 0 ? a.cpu.totalNs / 1000 / a.requests : null,
      scheduler_messages_per_req: messages === undefined ? null : messages / a.requests,
    };
  }
  return out;
}
