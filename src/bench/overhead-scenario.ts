/**
 * `llmgw bench overhead`: what llmgw adds on the way to the engine. Three
 * paths to the same sim-engines — direct (round-robin), a bare Bun
 * pass-through proxy (the runtime's floor), and llmgw — measured in
 * interleaved rounds at each concurrency so machine noise falls on all three
 * alike. Reports TTFT p50/p99 and inter-token p99 added over direct, the
 * throughput ratio, and llmgw's own llmgw_router_overhead_seconds p99.
 */
import { join } from "node:path";
import { boolFlag, numberFlag, stringFlag, UsageError } from "../cli/command.ts";
import { spawnLlmgw, writeGatewayConfig, REPO_ROOT, type LlmgwChild } from "../shared/llmgw-child.ts";
import type { BenchScenario } from "./command.ts";
import { histogramQuantile } from "./histogram-quantile.ts";
import { formatTable, median, quantile } from "./report.ts";
import { timedStream, type StreamTiming } from "./stream-client.ts";

const PATHS = ["direct", "bare", "llmgw"] as const;
type PathName = (typeof PATHS)[number];
const MODEL = "bench-model";

const USAGE = `usage: llmgw bench overhead [--concurrency 10,50,500] [--rounds N] [--tokens N] [--itl-ms MS] [--json]

Direct-to-engine vs a bare Bun pass-through proxy vs llmgw, against the same
sim-engines, interleaved in one run. Prints TTFT p50/p99 and inter-token p99
added over direct, throughput relative to direct, and llmgw's own
llmgw_router_overhead_seconds p99.

flags:
  --concurrency LIST  concurrent streams per level (default 10,50,500)
  --rounds N          interleaved rounds per level and path (default 6)
  --tokens N          tokens per response (default 8)
  --itl-ms MS         sim-engine inter-token latency (default 2; prefill 0)
  --engines N         sim-engines (default 3)
  --json              print one JSON object instead of the table`;

interface PathStats {
  ttft: number[];
  gaps: number[];
  /** Requests per second of each round. */
  rps: number[];
  errors: number;
}

function emptyStats(): Record<PathName, PathStats> {
  return { direct: { ttft: [], gaps: [], rps: [], errors: 0 }, bare: { ttft: [], gaps: [], rps: [], errors: 0 }, llmgw: { ttft: [], gaps: [], rps: [], errors: 0 } };
}

/** `concurrency` closed-loop workers, each sending `perWorker` streams back to back through `urlFor`. */
async function runRound(urlFor: (i: number) => string, concurrency: number, perWorker: number, body: string): Promise<{ timings: StreamTiming[]; seconds: number }> {
  const timings: StreamTiming[] = [];
  let seq = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let k = 0; k < perWorker; k++) timings.push(await timedStream(urlFor(seq++), body));
    }),
  );
  return { timings, seconds: (performance.now() - start) / 1000 };
}

export const overheadScenario: BenchScenario = {
  name: "overhead",
  summary: "latency llmgw adds: direct vs bare Bun proxy vs llmgw, interleaved",
  usage: USAGE,
  options: {
    concurrency: { type: "string" },
    rounds: { type: "string" },
    tokens: { type: "string" },
    "itl-ms": { type: "string" },
    engines: { type: "string" },
  },
  async run(args) {
    const levels = (stringFlag(args, "concurrency") ?? "10,50,500").split(",").map((s) => Number(s.trim()));
    if (levels.some((n) => !Number.isInteger(n) || n < 1 || n > 5000)) throw new UsageError("--concurrency: expected integers in [1, 5000], e.g. 10,50,500");
    const rounds = numberFlag(args, "rounds", 6, { min: 1, max: 100, integer: true });
    const tokens = numberFlag(args, "tokens", 8, { min: 1, max: 4096, integer: true });
    const itlMs = numberFlag(args, "itl-ms", 2, { min: 0, max: 1000 });
    const engineCount = numberFlag(args, "engines", 3, { min: 1, max: 16, integer: true });
    const json = boolFlag(args, "json");
    const say = (s: string) => {
      if (!json) console.error(s);
    };

    const children: LlmgwChild[] = [];
    try {
      say(`starting ${engineCount} sim-engines, a bare proxy and llmgw…`);
      const sims: LlmgwChild[] = [];
      for (let i = 0; i < engineCount; i++) {
        const sim = await spawnLlmgw(
          ["sim-engine", "--port", "0", "--model", MODEL, "--itl-ms", String(itlMs), "--prefill-overhead-ms", "0", "--prefill-ms-per-token", "0", "--jitter", "0", "--max-num-seqs", "1024"],
          { waitFor: 1 },
        );
        sims.push(sim);
        children.push(sim);
      }
      const simUrls = sims.map((s) => s.urls.api ?? s.url);
      const bare = await spawnLlmgw(["0", ...simUrls], { script: join(REPO_ROOT, "src", "bench", "bare-proxy.ts") });
      children.push(bare);
      const cfgPath = writeGatewayConfig({
        log_level: "info",
        // The sim-engines' batch size: this bench measures routing, not capacity learning.
        admission: { initial_capacity: 1024 },
        endpoints: simUrls.map((url, i) => ({ id: `sim-${i + 1}`, url, models: [MODEL] })),
      });
      const gw = await spawnLlmgw(["serve", "--config", cfgPath], { waitFor: 2 });
      children.push(gw);
      const gwApi = gw.urls.api!;
      const gwAdmin = gw.urls.admin!;
      // Wait for the health worker to see every engine ready.
      for (let i = 0; i < 100; i++) {
        const r = (await (await fetch(`${gwAdmin}/readyz`)).json()) as { endpoints_ready: number };
        if (r.endpoints_ready === engineCount) break;
        await Bun.sleep(100);
      }

      const body = JSON.stringify({ model: MODEL, stream: true, max_tokens: tokens, messages: [{ role: "user", content: "Say something short." }] });
      const urlFor: Record<PathName, (i: number) => string> = {
        direct: (i) => `${simUrls[i % simUrls.length]}/v1/chat/completions`,
        bare: () => `${bare.urls.api}/v1/chat/completions`,
        llmgw: () => `${gwApi}/v1/chat/completions`,
      };

      const results: Record<string, unknown>[] = [];
      const rows: (string | number)[][] = [];
      for (const concurrency of levels) {
        const stats = emptyStats();
        const perWorker = Math.max(1, Math.round(200 / concurrency));
        // Warm-up: connection pools and JIT on every path.
        for (const p of PATHS) await runRound(urlFor[p], Math.min(concurrency, 50), 1, body);
        for (let r = 0; r < rounds; r++) {
          // Rotate the order so no path always runs first (or last) in a round.
          const order = PATHS.map((_, i) => PATHS[(i + r) % PATHS.length]!);
          for (const p of order) {
            const { timings, seconds } = await runRound(urlFor[p], concurrency, perWorker, body);
            const s = stats[p];
            for (const t of timings) {
              if (!t.ok) {
                s.errors++;
                continue;
              }
              s.ttft.push(t.ttftMs);
              s.gaps.push(...t.gapsMs);
            }
            s.rps.push(timings.length / seconds);
          }
        }
        const d = stats.direct;
        const summary = (p: PathName) => {
          const s = stats[p];
          return {
            ttft_p50_ms: quantile(s.ttft, 0.5),
            ttft_p99_ms: quantile(s.ttft, 0.99),
            itl_p99_ms: quantile(s.gaps, 0.99),
            rps: median(s.rps),
            errors: s.errors,
            ttft_p50_added_ms: quantile(s.ttft, 0.5) - quantile(d.ttft, 0.5),
            ttft_p99_added_ms: quantile(s.ttft, 0.99) - quantile(d.ttft, 0.99),
            itl_p99_added_ms: quantile(s.gaps, 0.99) - quantile(d.gaps, 0.99),
            throughput_ratio: median(s.rps) / median(d.rps),
          };
        };
        const level = { concurrency, requests_per_path: rounds * perWorker * concurrency, direct: summary("direct"), bare: summary("bare"), llmgw: summary("llmgw") };
        results.push(level);
        for (const p of PATHS) {
          const s = level[p];
          rows.push([concurrency, p, s.ttft_p50_ms, s.ttft_p99_ms, s.ttft_p50_added_ms, s.ttft_p99_added_ms, s.itl_p99_added_ms, s.throughput_ratio, s.errors]);
        }
        say(`  concurrency ${concurrency}: done`);
      }
      const metricsText = await (await fetch(`${gwAdmin}/metrics`)).text();
      const overheadP50 = histogramQuantile(metricsText, "llmgw_router_overhead_seconds", 0.5);
      const overheadP99 = histogramQuantile(metricsText, "llmgw_router_overhead_seconds", 0.99);
      const report = {
        scenario: "overhead",
        engines: engineCount,
        itl_ms: itlMs,
        tokens,
        rounds,
        levels: results,
        router_overhead_p50_ms: overheadP50 === undefined ? null : overheadP50 * 1000,
        router_overhead_p99_ms: overheadP99 === undefined ? null : overheadP99 * 1000,
      };
      if (json) console.log(JSON.stringify(report));
      else {
        console.log(
          formatTable({
            title: `llmgw bench overhead — ${engineCount} sim-engines, itl ${itlMs} ms, ${tokens} tokens, ${rounds} interleaved rounds (ms; "added" = minus direct)`,
            columns: ["conc", "path", "ttft p50", "ttft p99", "p50 added", "p99 added", "itl p99 added", "thru ratio", "errors"],
            rows,
          }),
        );
        console.log(`\nllmgw_router_overhead_seconds: p50 ${report.router_overhead_p50_ms?.toFixed(3)} ms, p99 ${report.router_overhead_p99_ms?.toFixed(3)} ms (from the gateway's own histogram)`);
      }
      return 0;
    } finally {
      await Promise.all(children.map((c) => c.stop()));
    }
  },
};
