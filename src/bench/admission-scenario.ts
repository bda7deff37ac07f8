/**
 * `llmgw bench admission`: does interactive traffic stay fast under batch
 * load? Three sim-engines; a gateway with two bands — platinum (never
 * waits) and bronze (flows below a saturation ceiling). Platinum TTFT and
 * total latency are measured idle, then under continuous bronze load with
 * admission on, then with admission off. ratio = loaded p99 / idle p99.
 *
 * On a shared machine the loaded tail is mostly the machine's: the gateway's
 * event loop, busy relaying 500 streams, waits on a CPU run queue far more
 * than when idle (measured under a load average of 12 on 2 cores: stalls of
 * 0.4–1.5 s, under 0.1 s of each on a CPU — not GC, not the gateway's own
 * work). So each probe also records how long the processes on its path —
 * the gateway, the sim-engine that served it, this client — waited for a CPU
 * (the longest of them) until its first token and until its end
 * (run-queue-wait.ts), and its latency net of that wait is kept beside the
 * raw one. The net ratios are the verdict; platinum waiting behind bronze
 * (an admission queue, an engine's queue) is no run-queue wait and stays in
 * them, which the net ratio with admission off shows in the same run.
 */
import { boolFlag, numberFlag } from "../shared/flags.ts";
import { type LlmgwChild, spawnLlmgw, writeGatewayConfig } from "../shared/llmgw-child.ts";
import { type ClosedLoopLoadCounts, startClosedLoopLoad } from "./closed-loop-load.ts";
import {
  type EngineClockReport,
  engineClockCell,
  engineClockReport,
  engineClocksLine,
  STRICT_USAGE,
  sampleEngineClocks,
  strictVerdict,
} from "./engine-clock-report.ts";
import { formatTable, quantile } from "./report.ts";
import { RunQueueWatch } from "./run-queue-wait.ts";
import type { BenchScenario } from "./scenario.ts";
import { timedStream } from "./stream-client.ts";

const MODEL = "bench-model";
/**
 * Shorter than the 30 s default so the capacity warm-up's platinum bursts are
 * forgotten soon, but well over the gap between an idle probe block and the
 * loaded one after it (3 s of load start-up, more on a busy machine): with a
 * 4 s window that gap sometimes outlived platinum's peak, bronze was lent the
 * whole pool, and the first loaded probes waited a bronze wave (p99 ~8×).
 */
const RESERVE_WINDOW_MS = 10_000;
export const PLATINUM_KEY = "platinum-key-for-bench";
export const BRONZE_KEY = "bronze-key-for-bench";

export interface AdmissionBenchOptions {
  bronzeStreams: number;
  probes: number;
  /** Sequential platinum clients taking the probes (admission on, idle and loaded). */
  probeClients: number;
  /** Idle/loaded alternations with admission on (the probes are split between them). */
  rounds: number;
  /** Probes with admission off (each waits behind the engine queues: keep it small). */
  probesOff: number;
  maxNumSeqs: number;
  bronzeCeiling: number;
  log?: (line: string) => void;
}

export interface LatencySummary {
  ttft_p50_ms: number;
  ttft_p99_ms: number;
  total_p50_ms: number;
  total_p99_ms: number;
  errors: number;
  /** The three slowest probes by TTFT: which block, how far into it each started, and how long its path waited for a CPU before its first token (where a tail comes from). */
  slowest: { ttft_ms: number; block: string; at_ms: number; cpu_wait_ms: number | null }[];
  /** p99 of each probe's latency less the time its path waited for a CPU (the raw p99s where the kernel does not say). */
  ttft_p99_net_ms: number;
  total_p99_net_ms: number;
}

export interface AdmissionBenchReport {
  scenario: "admission";
  bronze_streams: number;
  engines: number;
  max_num_seqs: number;
  learned_capacity: number[];
  idle: LatencySummary;
  on: LatencySummary & { bronze_completed: number; bronze_errors: number };
  off: LatencySummary & { bronze_completed: number; bronze_errors: number };
  /** Bronze output tokens per second under load, admission on and off, and on / off. */
  bronze_tokens_per_s_on: number;
  bronze_tokens_per_s_off: number;
  throughput_ratio: number;
  /** Platinum TTFT p99 under load / idle, admission on and off. */
  ratio_on: number;
  ratio_off: number;
  total_ratio_on: number;
  total_ratio_off: number;
  /** The same ratios net of the probes' waits for a CPU: the verdict on a shared machine. */
  ratio_on_net: number;
  total_ratio_on_net: number;
  ratio_off_net: number;
  total_ratio_off_net: number;
  /** Whether the sim-engines kept their own clock through each phase's measured rounds. */
  engine_clock_on: EngineClockReport;
  engine_clock_off: EngineClockReport;
}

/** A latency less the time its path waited for a CPU (as it is where that is unknown). */
const net = (ms: number, waitMs: number) => (Number.isNaN(waitMs) ? ms : Math.max(0, ms - waitMs));

function summarize(samples: ProbeSample[]): LatencySummary {
  const ok = samples.filter((s) => s.ok);
  return {
    ttft_p50_ms: quantile(
      ok.map((s) => s.ttft),
      0.5,
    ),
    ttft_p99_ms: quantile(
      ok.map((s) => s.ttft),
      0.99,
    ),
    total_p50_ms: quantile(
      ok.map((s) => s.total),
      0.5,
    ),
    total_p99_ms: quantile(
      ok.map((s) => s.total),
      0.99,
    ),
    errors: samples.length - ok.length,
    slowest: [...ok]
      .sort((a, b) => b.ttft - a.ttft)
      .slice(0, 3)
      .map((p) => ({ ttft_ms: p.ttft, block: p.block, at_ms: Math.round(p.at), cpu_wait_ms: Number.isNaN(p.ttftWaitMs) ? null : Math.round(p.ttftWaitMs) })),
    ttft_p99_net_ms: quantile(
      ok.map((s) => net(s.ttft, s.ttftWaitMs)),
      0.99,
    ),
    total_p99_net_ms: quantile(
      ok.map((s) => net(s.total, s.totalWaitMs)),
      0.99,
    ),
  };
}

/** Output tokens every sim-engine has generated so far (vLLM's counter). */
async function generatedTokens(sims: readonly LlmgwChild[]): Promise<number> {
  let total = 0;
  for (const s of sims) {
    const text = await (await fetch(`${s.urls.api}/metrics`)).text();
    const m = /^vllm:generation_tokens_total(?:\{[^}]*\})? (\S+)$/m.exec(text);
    total += m ? Number(m[1]) : 0;
  }
  return total;
}

const PROBE_TOKENS = 4;

const body = (maxTokens: number, content: string) =>
  JSON.stringify({ model: MODEL, stream: true, max_tokens: maxTokens, messages: [{ role: "user", content }] });

/** `ttftWaitMs`, `totalWaitMs`: the longest a process on the probe's path waited for a CPU until its first token, until its end (NaN: unknown). */
type ProbeSample = { ttft: number; total: number; ok: boolean; block: string; at: number; ttftWaitMs: number; totalWaitMs: number };

/** The processes a probe goes through, for their run-queue waits: the gateway, the sim-engines (by endpoint id), this client. */
interface ProbePath {
  watch: RunQueueWatch;
  /** Index in the watch of each endpoint id's sim-engine. */
  simAt: ReadonlyMap<string, number>;
  /** Indexes of the gateway and of this process. */
  always: readonly number[];
}

/**
 * `n` platinum requests from `clients` sequential clients (each pauses 20 ms
 * between requests), each prompt new (`tag` keeps blocks apart, so no block
 * is served from a prefix cache the previous block warmed). Several clients
 * keep a phase short enough to take enough samples that p99 is a tail, not
 * the single slowest request.
 */
async function platinumProbes(api: string, n: number, clients: number, tag: string, path: ProbePath): Promise<ProbeSample[]> {
  const out: ProbeSample[] = [];
  const t0 = performance.now();
  let next = 0;
  const client = async () => {
    while (next < n) {
      const i = next++;
      const at = performance.now() - t0;
      const mark = path.watch.mark();
      let on: readonly number[] = path.always;
      let ttftWaitMs = Number.NaN;
      const r = await timedStream(`${api}/v1/chat/completions`, body(PROBE_TOKENS, `interactive question ${tag}-${i}`), {
        headers: { authorization: `Bearer ${PLATINUM_KEY}` },
        onOpen: (res) => {
          const sim = path.simAt.get(res.headers.get("x-llmgw-endpoint") ?? "");
          if (sim !== undefined) on = [...path.always, sim];
        },
        onFirstEvent: () => (ttftWaitMs = path.watch.waitedSince(mark, on)),
      });
      const totalWaitMs = path.watch.waitedSince(mark, on);
      out.push({ ttft: r.ttftMs, total: r.totalMs, ok: r.ok && r.events > 0, block: tag, at, ttftWaitMs, totalWaitMs });
      if (clients < n) await Bun.sleep(20);
    }
  };
  await Promise.all(Array.from({ length: Math.min(clients, n) }, client));
  return out;
}

async function startGatewayFor(sims: LlmgwChild[], opts: AdmissionBenchOptions, admission: boolean): Promise<LlmgwChild> {
  const path = writeGatewayConfig({
    health: { poll_interval_ms: 100 },
    auth: {
      keys: [
        { key: PLATINUM_KEY, tenant: "interactive-app", max_band: "platinum" },
        { key: BRONZE_KEY, tenant: "batch-pipeline", max_band: "bronze" },
      ],
    },
    tenants: [{ name: "interactive-app" }, { name: "batch-pipeline" }],
    admission: {
      enabled: admission,
      headroom: 0,
      // Work-conserving admission lends bronze the room platinum has not needed
      // for this long; the capacity warm-up's platinum bursts must be forgotten
      // before bronze load starts (the phase waits for it).
      reserve_window_ms: RESERVE_WINDOW_MS,
      default_band: "bronze",
      bands: [
        { name: "platinum", ceiling: 2, queue_limit: 1000, ttl_ms: 60_000 },
        { name: "bronze", ceiling: opts.bronzeCeiling, queue_limit: 10_000, ttl_ms: 600_000 },
      ],
    },
    endpoints: sims.map((s, i) => ({ id: `sim-${i + 1}`, url: s.urls.api, models: [MODEL] })),
  });
  // The launcher waits for the "listening" lines, which are logged at info.
  return spawnLlmgw(["serve", "--config", path, "--log-level", "info"], { waitFor: 2 });
}

async function endpointsState(admin: string): Promise<{ ready: boolean; capacity: number; inflight: number }[]> {
  return ((await (await fetch(`${admin}/admin/v1/endpoints`)).json()) as { endpoints: { ready: boolean; capacity: number; inflight: number }[] }).endpoints;
}

async function waitFor(cond: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await cond()) return true;
    await Bun.sleep(50);
  }
  return false;
}

export async function runAdmissionBench(opts: AdmissionBenchOptions): Promise<AdmissionBenchReport> {
  const log = opts.log ?? (() => {});
  const children: LlmgwChild[] = [];
  try {
    const sims: LlmgwChild[] = [];
    for (let i = 0; i < 3; i++) {
      const sim = await spawnLlmgw([
        "sim-engine",
        "--port",
        "0",
        "--model",
        MODEL,
        "--max-num-seqs",
        String(opts.maxNumSeqs),
        // --output-len 32: bronze asks for 60 tokens and ends at 32, as this bench was sized (answers' natural length is otherwise drawn per prompt).
        "--itl-ms",
        "20",
        "--prefill-overhead-ms",
        "250",
        "--batch-slowdown",
        "0",
        "--jitter",
        "0",
        "--output-len",
        "32",
        // Each step planned after the last one ended: under async scheduling (vLLM's default) a request reaching a busy
        // engine also waits for the step already planned, one more step of engine time that no admission can remove.
        "--no-async-scheduling",
      ]);
      sims.push(sim);
      children.push(sim);
    }
    const phase = async (admission: boolean, probes: number, probeClients: number, rounds: number) => {
      const gw = await startGatewayFor(sims, opts, admission);
      children.push(gw);
      const admin = gw.urls.admin!;
      const api = gw.urls.api!;
      await waitFor(async () => (await endpointsState(admin)).every((e) => e.ready), 15_000);
      // Learn the batch capacity: platinum bursts larger than the pool make every engine queue
      // (twice, so a scrape that caught an engine mid-step is corrected).
      for (let round = 0; round < 2; round++) {
        await Promise.all(
          Array.from({ length: opts.maxNumSeqs * 3 + 60 }, (_, i) =>
            timedStream(`${api}/v1/chat/completions`, body(15, `warm-up ${i}`), { headers: { authorization: `Bearer ${PLATINUM_KEY}` } }),
          ),
        );
      }
      const learned = (await endpointsState(admin)).map((e) => e.capacity);
      // Sim i is endpoint sim-<i+1> (startGatewayFor); the gateway and this process come after them.
      const path: ProbePath = {
        watch: new RunQueueWatch([...sims.map((s) => s.proc.pid), gw.proc.pid, process.pid]),
        simAt: new Map(sims.map((_, i) => [`sim-${i + 1}`, i])),
        always: [sims.length, sims.length + 1],
      };
      log(`  admission ${admission ? "on" : "off"}: learned capacity ${learned.join(", ")}`);
      if (admission) await Bun.sleep(RESERVE_WINDOW_MS); // the warm-up bursts leave the reserve window
      const clock0 = await sampleEngineClocks(sims.map((s) => s.urls.api!));
      const idle: ProbeSample[] = [];
      const loaded: ProbeSample[] = [];
      const counts = { completed: 0, errors: 0, tokens: 0, seconds: 0 };
      // Idle and loaded blocks alternate, so a noisy spell on a shared
      // machine lands in both rather than in one phase only.
      for (let round = 0; round < rounds; round++) {
        const n = Math.ceil((probes * (round + 1)) / rounds) - Math.ceil((probes * round) / rounds);
        if (admission) idle.push(...(await platinumProbes(api, n, probeClients, `idle-${round}`, path)));
        log(`  round ${round + 1}/${rounds}: ${opts.bronzeStreams} bronze streams`);
        const load = startClosedLoopLoad({
          url: `${api}/v1/chat/completions`,
          clients: opts.bronzeStreams,
          bodies: Array.from({ length: opts.bronzeStreams }, (_, i) => body(60, `batch document ${i}`)),
          headers: { authorization: `Bearer ${BRONZE_KEY}` },
        });
        let c: ClosedLoopLoadCounts;
        try {
          await Bun.sleep(3_000); // the bronze streams fill the engines (or the queue)
          // Output tokens the engines generated while the probes ran: the GPU
          // work done, measured where it is done (probe tokens taken out).
          const t0 = performance.now();
          const before = await generatedTokens(sims);
          const probed = await platinumProbes(api, n, probeClients, `loaded-${round}`, path);
          loaded.push(...probed);
          counts.tokens += (await generatedTokens(sims)) - before - probed.length * PROBE_TOKENS;
          counts.seconds += (performance.now() - t0) / 1000;
        } finally {
          c = await load.stop();
        }
        counts.completed += c.completed;
        counts.errors += c.errors;
        await waitFor(async () => (await endpointsState(admin)).every((e) => e.inflight === 0), 30_000);
      }
      const clock = engineClockReport(clock0, await sampleEngineClocks(sims.map((s) => s.urls.api!)));
      await gw.stop();
      children.splice(children.indexOf(gw), 1);
      return { learned, idle, loaded, counts, clock };
    };
    log("phase 1: admission on");
    const on = await phase(true, opts.probes, opts.probeClients, opts.rounds);
    log("phase 2: admission off");
    const off = await phase(false, opts.probesOff, opts.probesOff, 1);
    const idle = summarize(on.idle);
    const onS = summarize(on.loaded);
    const offS = summarize(off.loaded);
    return {
      scenario: "admission",
      bronze_streams: opts.bronzeStreams,
      engines: 3,
      max_num_seqs: opts.maxNumSeqs,
      learned_capacity: on.learned,
      idle,
      on: { ...onS, bronze_completed: on.counts.completed, bronze_errors: on.counts.errors },
      off: { ...offS, bronze_completed: off.counts.completed, bronze_errors: off.counts.errors },
      bronze_tokens_per_s_on: on.counts.tokens / on.counts.seconds,
      bronze_tokens_per_s_off: off.counts.tokens / off.counts.seconds,
      throughput_ratio: on.counts.tokens / on.counts.seconds / (off.counts.tokens / off.counts.seconds),
      engine_clock_on: on.clock,
      engine_clock_off: off.clock,
      ratio_on: onS.ttft_p99_ms / idle.ttft_p99_ms,
      ratio_off: offS.ttft_p99_ms / idle.ttft_p99_ms,
      total_ratio_on: onS.total_p99_ms / idle.total_p99_ms,
      total_ratio_off: offS.total_p99_ms / idle.total_p99_ms,
      ratio_on_net: onS.ttft_p99_net_ms / idle.ttft_p99_net_ms,
      total_ratio_on_net: onS.total_p99_net_ms / idle.total_p99_net_ms,
      ratio_off_net: offS.ttft_p99_net_ms / idle.ttft_p99_net_ms,
      total_ratio_off_net: offS.total_p99_net_ms / idle.total_p99_net_ms,
    };
  } finally {
    await Promise.all(children.map((c) => c.stop()));
  }
}

const USAGE = `usage: llmgw bench admission [--bronze N] [--probes N] [--probe-clients N] [--rounds N]
                             [--max-num-seqs N] [--bronze-ceiling F] [--strict] [--json]

Three sim-engines behind a gateway with two bands: platinum (never waits) and
bronze (flows while pool saturation is below its ceiling). Measures platinum
TTFT and total latency idle, then under N continuous bronze streams with
admission on, then off. Prints both, and ratio_on / ratio_off = platinum TTFT
p99 under load / idle. With admission on, idle and loaded blocks alternate
(--rounds), so a noisy spell on a shared machine falls on both sides.

flags:
  --bronze N           concurrent bronze streams (default 500)
  --probes N           platinum requests measured idle, and again under load
                       (default 120: p99 is then the 2nd-3rd slowest, not one
                       stray outlier; with admission off, 8 sent at once)
  --probe-clients N    sequential platinum clients sending them (default 3)
  --rounds N           idle/loaded alternations with admission on (default 2)
  --max-num-seqs N     batch slots per sim-engine (default 32)
  --bronze-ceiling F   bronze band's saturation ceiling (default 0.6)
${STRICT_USAGE}
  --json               one JSON object instead of the table`;

export const admissionScenario: BenchScenario = {
  name: "admission",
  summary: "platinum TTFT under bronze load, admission on and off",
  usage: USAGE,
  options: {
    bronze: { type: "string" },
    probes: { type: "string" },
    "probe-clients": { type: "string" },
    rounds: { type: "string" },
    "max-num-seqs": { type: "string" },
    "bronze-ceiling": { type: "string" },
    strict: { type: "boolean" },
  },
  async run(args) {
    const json = boolFlag(args, "json");
    const r = await runAdmissionBench({
      bronzeStreams: numberFlag(args, "bronze", 500, { min: 1, max: 5000, integer: true }),
      probes: numberFlag(args, "probes", 120, { min: 3, max: 10_000, integer: true }),
      probeClients: numberFlag(args, "probe-clients", 3, { min: 1, max: 100, integer: true }),
      rounds: numberFlag(args, "rounds", 2, { min: 1, max: 20, integer: true }),
      probesOff: 8,
      maxNumSeqs: numberFlag(args, "max-num-seqs", 32, { min: 1, max: 4096, integer: true }),
      bronzeCeiling: numberFlag(args, "bronze-ceiling", 0.6, { min: 0, max: 1 }),
      log: json ? undefined : (l) => console.error(l),
    });
    const strict = strictVerdict(args, [r.engine_clock_on, r.engine_clock_off]);
    if (json) {
      console.log(JSON.stringify(r));
      return strict;
    }
    const row = (name: string, s: LatencySummary, ratio: number | string, tRatio: number | string) => [
      name,
      s.ttft_p50_ms,
      s.ttft_p99_ms,
      s.total_p50_ms,
      s.total_p99_ms,
      ratio,
      tRatio,
      s.errors,
    ];
    console.log(
      formatTable({
        title: `llmgw bench admission — 3 sim-engines × ${r.max_num_seqs} slots, ${r.bronze_streams} bronze streams (ms; ratio = p99 / idle p99)`,
        columns: ["platinum", "ttft p50", "ttft p99", "total p50", "total p99", "ttft ratio", "total ratio", "errors"],
        rows: [
          row("idle", r.idle, 1, 1),
          row("load, admission on", r.on, r.ratio_on, r.total_ratio_on),
          row("load, admission off", r.off, r.ratio_off, r.total_ratio_off),
        ],
      }),
    );
    const slow = (s: LatencySummary) =>
      s.slowest.map((p) => `${p.ttft_ms.toFixed(0)} ms (${p.block}, ${p.at_ms} ms in, ${p.cpu_wait_ms ?? "?"} ms waiting for a CPU)`).join(", ");
    console.log(`\nslowest platinum probes: idle ${slow(r.idle)}; loaded ${slow(r.on)}`);
    console.log(
      `net of the time each probe's path waited for a CPU: ttft p99 idle ${r.idle.ttft_p99_net_ms.toFixed(1)}, loaded ${r.on.ttft_p99_net_ms.toFixed(1)} ms; ` +
        `ratio on ${r.ratio_on_net.toFixed(3)} (total ${r.total_ratio_on_net.toFixed(3)}), off ${r.ratio_off_net.toFixed(2)} (total ${r.total_ratio_off_net.toFixed(2)})`,
    );
    console.log(`learned capacity per engine: ${r.learned_capacity.join(", ")}; bronze completed on/off: ${r.on.bronze_completed}/${r.off.bronze_completed}`);
    console.log(
      `bronze output: ${r.bronze_tokens_per_s_on.toFixed(0)} tokens/s with admission, ${r.bronze_tokens_per_s_off.toFixed(0)} without: throughput_ratio ${r.throughput_ratio.toFixed(3)}`,
    );
    console.log(
      `engines' clock, timer p99 late ms / schedule slipped: admission on ${engineClockCell(r.engine_clock_on)}, off ${engineClockCell(r.engine_clock_off)}`,
    );
    const clocks = engineClocksLine([
      { name: "admission on", clock: r.engine_clock_on },
      { name: "admission off", clock: r.engine_clock_off },
    ]);
    if (clocks) console.log(clocks);
    return strict;
  },
};
