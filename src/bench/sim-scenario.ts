/**
 * `llmgw bench sim`: how many concurrent streams one sim-engine process
 * sustains, and at what CPU cost. Starts a sim-engine child, opens N
 * streaming completions at once per level, measures inter-token gaps on the
 * client side (byte scanning, no JSON parsing) and the engine's CPU time
 * from /sim/state before and after.
 */
import { numberFlag, type ParsedArgs, UsageError } from "../shared/flags.ts";
import { spawnLlmgw } from "../shared/llmgw-child.ts";
import { observeStream } from "../sim/stream-probe.ts";
import {
  type EngineClockReport,
  engineClockCell,
  engineClockReport,
  engineClocksLine,
  STRICT_USAGE,
  sampleEngineClocks,
  strictVerdict,
} from "./engine-clock-report.ts";
import { formatTable, median, quantile } from "./report.ts";
import type { BenchScenario } from "./scenario.ts";

const DEFAULT_LEVELS = [100, 500, 1000];
const DEFAULT_ITL_MS = 50;
const DEFAULT_TOKENS = 40;
const MODEL = "bench-sim";
const START_TIMEOUT_MS = 15_000;

const USAGE = `usage: llmgw bench sim [--concurrency 100,500,1000] [--itl-ms 50] [--tokens 40] [--strict] [--json]

Starts one sim-engine process and, per concurrency level, opens that many
streaming completions at once (each ${DEFAULT_TOKENS} tokens by default). Reports
streams completed and failed, the median and p99 inter-token gap observed by
the client, median/ITL, the engine's CPU seconds per 1,000 tokens and CPU%,
and whether the engine kept its own clock (its timer's p99 lateness, how far
its schedule slipped).

flags:
  --concurrency LIST   streams at once, one level after another (default ${DEFAULT_LEVELS.join(",")})
  --itl-ms MS          the engine's inter-token latency (default ${DEFAULT_ITL_MS})
  --tokens N           tokens per stream (default ${DEFAULT_TOKENS})
${STRICT_USAGE}
  --json               one JSON object instead of the table`;

export interface SimLevelResult {
  concurrency: number;
  completed: number;
  errors: number;
  tokens: number;
  medianGapMs: number;
  p99GapMs: number;
  ratio: number;
  medianTtftMs: number;
  cpuSecondsPer1kTokens: number;
  cpuPercent: number;
  wallS: number;
  engineClock: EngineClockReport;
}

export interface SimBenchOptions {
  levels: number[];
  itlMs: number;
  tokens: number;
}

interface SimChild {
  url: string;
  stop(): Promise<void>;
}

/** Start `llmgw sim-engine` as a child (src/shared/llmgw-child.ts) sized for the largest level. */
async function startSim(opts: SimBenchOptions): Promise<SimChild> {
  const maxLevel = Math.max(...opts.levels);
  const blocksPerSeq = Math.ceil((opts.tokens + 64) / 16) + 1;
  const args = ["sim-engine", "--port", "0", "--model", MODEL, "--itl-ms", String(opts.itlMs), "--max-num-seqs", String(maxLevel)];
  args.push(
    "--num-gpu-blocks",
    String(blocksPerSeq * maxLevel + 64),
    "--batch-slowdown",
    "0",
    "--jitter",
    "0",
    "--prefill-overhead-ms",
    "1",
    "--prefill-ms-per-token",
    "0",
  );
  const child = await spawnLlmgw(args, { timeoutMs: START_TIMEOUT_MS, env: { LLMGW_LOG_LEVEL: "info" } });
  return {
    url: child.urls.api ?? child.url,
    async stop() {
      await child.stop();
    },
  };
}

async function cpuUs(url: string): Promise<number> {
  const s = (await (await fetch(`${url}/sim/state`)).json()) as { cpu: { user_us: number; system_us: number } };
  return s.cpu.user_us + s.cpu.system_us;
}

/** Run one level: `n` concurrent streams of `tokens` tokens each. */
async function runLevel(url: string, n: number, opts: SimBenchOptions): Promise<SimLevelResult> {
  const body = JSON.stringify({ model: MODEL, prompt: "Benchmark prompt for the sim-engine.", max_tokens: opts.tokens, ignore_eos: true, stream: true });
  const gaps: number[] = [];
  const ttfts: number[] = [];
  let completed = 0;
  let errors = 0;
  let tokens = 0;
  const deadline = AbortSignal.timeout(Math.max(30_000, opts.tokens * opts.itlMs * 4 + 20_000));
  const cpu0 = await cpuUs(url);
  const clock0 = await sampleEngineClocks([url]);
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: n }, async () => {
      const started = performance.now();
      try {
        const res = await fetch(`${url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body, signal: deadline });
        if (res.status !== 200 || !res.body) {
          errors++;
          return;
        }
        const obs = await observeStream(res.body, started, gaps);
        tokens += obs.events;
        if (obs.ok && obs.events === opts.tokens) {
          completed++;
          ttfts.push(obs.ttftMs);
        } else errors++;
      } catch {
        errors++;
      }
    }),
  );
  const wallMs = performance.now() - t0;
  const engineClock = engineClockReport(clock0, await sampleEngineClocks([url]));
  const cpu1 = await cpuUs(url);
  const cpuS = (cpu1 - cpu0) / 1e6;
  const medianGapMs = median(gaps);
  return {
    concurrency: n,
    completed,
    errors,
    tokens,
    medianGapMs,
    p99GapMs: quantile(gaps, 0.99),
    ratio: medianGapMs / opts.itlMs,
    medianTtftMs: median(ttfts),
    cpuSecondsPer1kTokens: tokens > 0 ? cpuS / (tokens / 1000) : NaN,
    cpuPercent: (cpuS / (wallMs / 1000)) * 100,
    wallS: wallMs / 1000,
    engineClock,
  };
}

/** The whole benchmark; exported for the integration test. */
export async function runSimBench(opts: SimBenchOptions): Promise<SimLevelResult[]> {
  const sim = await startSim(opts);
  try {
    const out: SimLevelResult[] = [];
    for (const n of opts.levels) {
      out.push(await runLevel(sim.url, n, opts));
      await Bun.sleep(200);
    }
    return out;
  } finally {
    await sim.stop();
  }
}

function parseLevels(raw: string | undefined): number[] {
  if (raw === undefined) return DEFAULT_LEVELS;
  const levels = raw.split(",").map((s) => Number(s.trim()));
  if (levels.length === 0 || levels.some((n) => !Number.isInteger(n) || n < 1 || n > 20_000))
    throw new UsageError(`--concurrency: expected a list of integers in [1, 20000], got '${raw}'`);
  return levels;
}

export const simScenario: BenchScenario = {
  name: "sim",
  summary: "concurrent streams one sim-engine sustains, and at what CPU cost",
  usage: USAGE,
  options: { concurrency: { type: "string" }, "itl-ms": { type: "string" }, tokens: { type: "string" }, strict: { type: "boolean" } },
  async run(args: ParsedArgs) {
    const raw = args.values.concurrency;
    const opts: SimBenchOptions = {
      levels: parseLevels(typeof raw === "string" ? raw : undefined),
      itlMs: numberFlag(args, "itl-ms", DEFAULT_ITL_MS, { min: 1, max: 10_000 }),
      tokens: numberFlag(args, "tokens", DEFAULT_TOKENS, { min: 2, max: 100_000, integer: true }),
    };
    const results = await runSimBench(opts);
    if (args.values.json === true) {
      console.log(JSON.stringify({ scenario: "sim", itl_ms: opts.itlMs, tokens_per_stream: opts.tokens, levels: results }));
    } else {
      const rows = results.map((r) => [
        r.concurrency,
        r.completed,
        r.errors,
        r.medianGapMs,
        r.p99GapMs,
        r.ratio,
        r.medianTtftMs,
        r.cpuSecondsPer1kTokens,
        r.cpuPercent,
        engineClockCell(r.engineClock),
        r.wallS,
      ]);
      const columns = [
        "streams",
        "ok",
        "errors",
        "gap p50 ms",
        "gap p99 ms",
        "p50/itl",
        "ttft p50 ms",
        "cpu s/1k tok",
        "cpu %",
        "engine late p99 ms / slipped",
        "wall s",
      ];
      console.log(formatTable({ title: `bench sim: one sim-engine, itl ${opts.itlMs} ms, ${opts.tokens} tokens per stream`, columns, rows }));
      const clocks = engineClocksLine(results.map((r) => ({ name: `${r.concurrency} streams`, clock: r.engineClock })));
      if (clocks) console.log(`\n${clocks}`);
    }
    if (!results.every((r) => r.errors === 0)) return 1;
    return strictVerdict(
      args,
      results.map((r) => r.engineClock),
    );
  },
};
