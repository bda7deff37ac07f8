/**
 * `llmgw bench relay`: the SSE relay's transports side by side in one run —
 * three gateways that differ only in relay_variant (Bun's direct stream,
 * a pull stream with one enqueue per upstream chunk, one enqueue per event)
 * and the bare Bun pass-through as the floor — against the same sim-engines,
 * interleaved, at one concurrency. Every llmgw variant keeps every guarantee
 * (backpressure, abort, the explicit error event, usage, [DONE], the event
 * bound); only how bytes reach Bun's response differs.
 */
import { join } from "node:path";
import { boolFlag, numberFlag } from "../shared/flags.ts";
import { RELAY_VARIANTS } from "../config/plugin-names.ts";
import { spawnLlmgw, writeGatewayConfig, REPO_ROOT, type LlmgwChild } from "../shared/llmgw-child.ts";
import { comparePaths, type BenchPath } from "./path-compare.ts";
import { formatTable } from "./report.ts";
import type { BenchScenario } from "./scenario.ts";

const MODEL = "bench-model";

const USAGE = `usage: llmgw bench relay [--concurrency N] [--tokens N] [--itl-ms MS] [--prefill-ms MS] [--rounds N] [--requests N] [--json]

Gateways that differ only in relay_variant (direct, chunk, event) and a bare
Bun pass-through (native, the floor), against the same three sim-engines,
in interleaved rounds. Reports TTFT and inter-token p50/p99, throughput and
each proxy's CPU per request (main thread and whole process).

flags:
  --concurrency N   concurrent streams (default 50)
  --tokens N        tokens per stream (default 32)
  --itl-ms MS       sim-engine inter-token latency (default 2)
  --prefill-ms MS   sim-engine prefill (TTFT) (default 20)
  --rounds N        interleaved rounds (default 5)
  --requests N      requests per path per round (default 400)
  --json            one JSON object instead of the table`;

export const relayScenario: BenchScenario = {
  name: "relay",
  summary: "the SSE relay's transports side by side: direct, chunk, event, and native pass-through",
  usage: USAGE,
  options: { concurrency: { type: "string" }, tokens: { type: "string" }, "itl-ms": { type: "string" }, "prefill-ms": { type: "string" }, rounds: { type: "string" }, requests: { type: "string" } },
  async run(args) {
    const concurrency = numberFlag(args, "concurrency", 50, { min: 1, max: 5000, integer: true });
    const tokens = numberFlag(args, "tokens", 32, { min: 1, max: 4096, integer: true });
    const itlMs = numberFlag(args, "itl-ms", 2, { min: 0, max: 1000 });
    const prefillMs = numberFlag(args, "prefill-ms", 20, { min: 0, max: 10_000 });
    const rounds = numberFlag(args, "rounds", 5, { min: 1, max: 100, integer: true });
    const requests = numberFlag(args, "requests", 400, { min: 10, max: 100_000, integer: true });
    const json = boolFlag(args, "json");
    const children: LlmgwChild[] = [];
    try {
      const sims: LlmgwChild[] = [];
      for (let i = 0; i < 3; i++) {
        sims.push(
          await spawnLlmgw([
            "sim-engine", "--port", "0", "--model", MODEL, "--max-num-seqs", "1024", "--batch-slowdown", "0", "--jitter", "0",
            "--itl-ms", String(itlMs), "--prefill-overhead-ms", String(prefillMs), "--prefill-ms-per-token", "0",
          ]),
        );
      }
      children.push(...sims);
      const simUrls = sims.map((s) => s.urls.api ?? s.url);
      const bare = await spawnLlmgw(["0", ...simUrls], { script: join(REPO_ROOT, "src", "bench", "bare-proxy.ts") });
      children.push(bare);
      const paths: BenchPath[] = [{ name: "native (bare Bun)", url: () => `${bare.urls.api}/v1/chat/completions`, pid: bare.proc.pid }];
      for (const variant of RELAY_VARIANTS) {
        const gw = await spawnLlmgw(
          ["serve", "--config", writeGatewayConfig({ relay_variant: variant, admission: { initial_capacity: 1024 }, endpoints: simUrls.map((url, i) => ({ id: `sim-${i + 1}`, url, models: [MODEL] })) })],
          { waitFor: 2 },
        );
        children.push(gw);
        paths.push({ name: `llmgw ${variant}`, url: () => `${gw.urls.api}/v1/chat/completions`, pid: gw.proc.pid });
      }
      await Bun.sleep(1500); // first engine polls
      const body = JSON.stringify({ model: MODEL, stream: true, max_tokens: tokens, messages: [{ role: "user", content: "Say something short." }] });
      const r = await comparePaths(paths, { concurrency, requestsPerRound: Math.max(requests, concurrency * 2), rounds, body });
      const report = { scenario: "relay", concurrency, tokens, itl_ms: itlMs, prefill_ms: prefillMs, rounds, paths: r };
      if (json) console.log(JSON.stringify(report));
      else {
        const floor = r["native (bare Bun)"]!;
        console.log(
          formatTable({
            title: `llmgw bench relay — c=${concurrency}, ${tokens} tokens, itl ${itlMs} ms, prefill ${prefillMs} ms (ms; CPU µs per request)`,
            columns: ["path", "ttft p50", "ttft p99", "itl p50", "itl p99", "rps", "× native", "main CPU", "all CPU", "errors"],
            rows: Object.entries(r).map(([name, s]) => [name, s.ttft_p50_ms, s.ttft_p99_ms, s.itl_p50_ms, s.itl_p99_ms, s.rps, s.rps / floor.rps, s.main_cpu_us_per_req ?? "—", s.cpu_us_per_req ?? "—", s.errors]),
          }),
        );
      }
      return 0;
    } finally {
      await Promise.all(children.map((c) => c.stop()));
    }
  },
};
