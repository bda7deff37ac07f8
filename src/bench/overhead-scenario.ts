/**
 * `llmgw bench overhead`: what llmgw adds on the way to the engine, against
 * the floor of its runtime and a native proxy. The same sim-engines are
 * reached directly (round-robin), through nginx (when installed), through a
 * bare Bun pass-through, through the same pass-through with its answer's
 * bytes relayed by JavaScript (bare-relay: the floor of any relay on Bun
 * that observes a stream through fetch), through that relay with the
 * engines reached by llmgw's HTTP/1.1 client (bare-http1: the floor of
 * llmgw's relay), through llmgw with its default configuration
 * (admission and all four scorers on), through llmgw following the engines'
 * KV-cache events (precise-prefix routing: each request's prompt tokenized
 * or found in the cache), and through llmgw with API keys and a tenant
 * quota — in interleaved rounds per case. Reports TTFT p50/p99 added
 * over direct and over bare Bun, throughput, the proxies' CPU per request
 * (main thread and whole process), scheduler messages per request, each
 * target met or not, and llmgw's main-thread CPU split into bare-http1's
 * floor and its own work.
 */
import { existsSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { boolFlag, numberFlag, stringFlag, UsageError } from "../shared/flags.ts";
import { type LlmgwChild, REPO_ROOT, spawnLlmgw, writeGatewayConfig } from "../shared/llmgw-child.ts";
import { type NginxProxy, startNginx } from "./nginx-proxy.ts";
import { type BenchPath, comparePaths, type PathResult } from "./path-compare.ts";
import { formatTable } from "./report.ts";
import type { BenchScenario } from "./scenario.ts";

const MODEL = "bench-model";
const BENCH_KEY = "bench-overhead-key-0001";

/** The cases: concurrency, what the engine does, and (kv) a prompt long enough to be tokenized for precise-prefix routing. */
const CASES = {
  c10: { concurrency: 10, prefillMs: 0, itlMs: 0, tokens: 8, longPrompt: false, what: "c=10, zero-latency engine" },
  c50: { concurrency: 50, prefillMs: 20, itlMs: 2, tokens: 8, longPrompt: false, what: "c=50, engine with 20 ms TTFT" },
  sat: { concurrency: 256, prefillMs: 0, itlMs: 0, tokens: 8, longPrompt: false, what: "saturation: c=256, zero-latency engine" },
  kv: {
    concurrency: 10,
    prefillMs: 0,
    itlMs: 0,
    tokens: 8,
    longPrompt: true,
    what: "c=10, zero-latency engine, a shared ~2k-token system prompt and a question of each request's own",
  },
} as const;

/** The kv case's shared system prompt (~8,000 characters: ~2,000 tokens, 125 blocks of 16). */
const SHARED_SYSTEM = "You are the support assistant of a large hardware store; answer briefly, cite the aisle. ".repeat(90);
type CaseName = keyof typeof CASES;

const USAGE = `usage: llmgw bench overhead [--cases c10,c50,sat,kv] [--rounds N] [--requests N] [--engines N] [--baseline DIR] [--cpu-prof DIR] [--json]

The same sim-engines (publishing KV-cache events) reached directly, through
nginx (if installed), a bare Bun pass-through, the same pass-through
relaying the answer's bytes through JavaScript (bare-relay: what any relay
on Bun that observes a stream pays), the same relay reaching the engines
through llmgw's HTTP/1.1 client instead of fetch (bare-http1: the floor of
llmgw's own relay), llmgw (default config),
llmgw following the engines' KV-cache events (llmgw+kv: precise-prefix,
prompts tokenized) and llmgw with API keys and a tenant quota, interleaved
in rounds. Prints TTFT p50/p99 and their added cost over
direct and over bare Bun, throughput, CPU per request of each proxy (main
thread / whole process), scheduler messages per request, the targets, and
llmgw's main-thread CPU split into the bare-http1 floor and its own work.

cases: ${Object.entries(CASES)
  .map(([n, c]) => `${n} (${c.what})`)
  .join(", ")}

flags:
  --cases LIST     which cases (default c10,c50,sat,kv)
  --rounds N       interleaved rounds per case (default 5)
  --requests N     requests per path per round (default 400)
  --engines N      sim-engines (default 3)
  --baseline DIR   another llmgw checkout (e.g. a git worktree of an older
                   commit, with its node_modules): its gateway, default
                   config, runs as one more row, "baseline", in the same
                   rounds against the same engines — before vs after
  --cpu-prof DIR   run the llmgw row's gateway under Bun's CPU profiler:
                   its .cpuprofile (Chrome DevTools format) is written to
                   DIR when the bench stops it
  --json           print one JSON object instead of the tables`;

interface Started {
  sims: LlmgwChild[];
  paths: BenchPath[];
  stop(): Promise<void>;
}

/** The gateway of another llmgw checkout (`--baseline`), with the default config. */
async function startBaseline(dir: string, config: string): Promise<LlmgwChild> {
  const cli = join(dir, "src", "cli.ts");
  if (!existsSync(cli)) throw new UsageError(`--baseline: ${dir} is not an llmgw checkout (no src/cli.ts)`);
  return spawnLlmgw(["serve", "--config", config], { script: cli, waitFor: 2 });
}

async function startPaths(engines: number, say: (s: string) => void, baselineDir?: string, cpuProfDir?: string): Promise<Started> {
  const children: LlmgwChild[] = [];
  let nginx: NginxProxy | undefined;
  const stop = async () => {
    await Promise.all(children.map((c) => c.stop()));
    await nginx?.stop();
  };
  try {
    const kvConfig = JSON.stringify({ enable_kv_cache_events: true, publisher: "zmq", endpoint: "tcp://*:0", replay_endpoint: "tcp://*:0", topic: "kv" });
    for (let i = 0; i < engines; i++) {
      children.push(
        await spawnLlmgw(
          ["sim-engine", "--port", "0", "--model", MODEL, "--jitter", "0", "--max-num-seqs", "1024", "--batch-slowdown", "0", "--kv-events-config", kvConfig],
          { waitFor: 3 },
        ),
      );
    }
    const sims = [...children];
    const simUrls = sims.map((s) => s.urls.api ?? s.url);
    const bare = await spawnLlmgw(["0", ...simUrls], { script: join(REPO_ROOT, "src", "bench", "bare-proxy.ts") });
    children.push(bare);
    const bareRelay = await spawnLlmgw(["0", "--relay", ...simUrls], { script: join(REPO_ROOT, "src", "bench", "bare-proxy.ts") });
    children.push(bareRelay);
    const bareHttp1 = await spawnLlmgw(["0", "--http1", ...simUrls], { script: join(REPO_ROOT, "src", "bench", "bare-proxy.ts") });
    children.push(bareHttp1);
    const endpoints = simUrls.map((url, i) => ({ id: `sim-${i + 1}`, url, models: [MODEL] }));
    // The sim-engines' batch size: this bench measures routing, not capacity learning.
    const base = { log_level: "info", admission: { initial_capacity: 1024 }, endpoints };
    const gw = await spawnLlmgw(["serve", "--config", writeGatewayConfig(base)], {
      waitFor: 2,
      ...(cpuProfDir === undefined ? {} : { runtimeArgs: ["--cpu-prof", `--cpu-prof-dir=${cpuProfDir}`] }),
    });
    children.push(gw);
    // The same engines, their KV-cache events followed: precise-prefix routes on them, prompts long enough are tokenized.
    const kvEndpoints = sims.map((s, i) => ({
      ...endpoints[i]!,
      kv_events: { endpoint: s.urls["kv-events"]!, replay_endpoint: s.urls["kv-replay"]!, topic: "kv" },
    }));
    const gwKv = await spawnLlmgw(["serve", "--config", writeGatewayConfig({ ...base, endpoints: kvEndpoints })], { waitFor: 2 });
    children.push(gwKv);
    const gwKeys = await spawnLlmgw(
      [
        "serve",
        "--config",
        writeGatewayConfig({
          ...base,
          auth: { keys: [{ key: BENCH_KEY, tenant: "bench" }] },
          // A quota that is checked on every request but never binds.
          tenants: [{ name: "bench", requests_per_minute: 100_000_000, tokens_per_minute: 1_000_000_000 }],
        }),
      ],
      { waitFor: 2 },
    );
    children.push(gwKeys);
    const baseline = baselineDir === undefined ? undefined : await startBaseline(baselineDir, writeGatewayConfig(base));
    if (baseline) children.push(baseline);
    for (const g of baseline ? [gw, gwKv, gwKeys, baseline] : [gw, gwKv, gwKeys]) {
      for (let i = 0; i < 100; i++) {
        const r = (await (await fetch(`${g.urls.admin}/readyz`)).json()) as { endpoints_ready: number };
        if (r.endpoints_ready === engines) break;
        await Bun.sleep(100);
      }
    }
    for (let i = 0; i < 100; i++) {
      const text = await (await fetch(`${gwKv.urls.admin}/metrics`)).text();
      if (text.split("\n").filter((l) => l.startsWith("llmgw_kv_events_stream_state{") && l.includes('state="live"') && l.endsWith(" 1")).length === engines)
        break;
      await Bun.sleep(100);
    }
    nginx = await startNginx(simUrls);
    if (!nginx) say("nginx is not installed: its row is left out (apt-get install nginx)");
    const paths: BenchPath[] = [{ name: "direct", url: (i) => `${simUrls[i % simUrls.length]}/v1/chat/completions` }];
    if (nginx) paths.push({ name: "nginx", url: () => `${nginx!.url}/v1/chat/completions`, ...(nginx.workerPid ? { pid: nginx.workerPid } : {}) });
    paths.push(
      { name: "bare", url: () => `${bare.urls.api}/v1/chat/completions`, pid: bare.proc.pid },
      { name: "bare-relay", url: () => `${bareRelay.urls.api}/v1/chat/completions`, pid: bareRelay.proc.pid },
      { name: "bare-http1", url: () => `${bareHttp1.urls.api}/v1/chat/completions`, pid: bareHttp1.proc.pid },
      { name: "llmgw", url: () => `${gw.urls.api}/v1/chat/completions`, pid: gw.proc.pid, adminUrl: gw.urls.admin! },
      { name: "llmgw+kv", url: () => `${gwKv.urls.api}/v1/chat/completions`, pid: gwKv.proc.pid, adminUrl: gwKv.urls.admin! },
      {
        name: "llmgw+keys",
        url: () => `${gwKeys.urls.api}/v1/chat/completions`,
        headers: { authorization: `Bearer ${BENCH_KEY}` },
        pid: gwKeys.proc.pid,
        adminUrl: gwKeys.urls.admin!,
      },
      // No adminUrl: an older gateway may not count its scheduler messages (its row shows none rather than a false 0).
      ...(baseline ? [{ name: "baseline", url: () => `${baseline.urls.api}/v1/chat/completions`, pid: baseline.proc.pid }] : []),
    );
    return { sims, paths, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * Each target for one case: [what, met, detail]. Latency and throughput
 * against bare Bun (the floor of the runtime); main-thread CPU per request
 * ≤ 1.5 × bare Bun's where requests are not queued (c=10, c=50).
 */
function targets(name: CaseName, r: Record<string, PathResult>): [string, boolean, string][] {
  const bare = r.bare!;
  const gw = r.llmgw!;
  const out: [string, boolean, string][] = [];
  const dp50 = gw.ttft_p50_ms - bare.ttft_p50_ms;
  const dp99 = gw.ttft_p99_ms - bare.ttft_p99_ms;
  if (name === "c10") {
    out.push(["c10 TTFT p50 within 0.3 ms of bare", dp50 <= 0.3, `${dp50.toFixed(2)} ms`]);
    out.push(["c10 TTFT p99 within 1.5 ms of bare", dp99 <= 1.5, `${dp99.toFixed(2)} ms`]);
  } else if (name === "c50") {
    out.push(["c50 TTFT p50 within 1 ms of bare", dp50 <= 1, `${dp50.toFixed(2)} ms`]);
    out.push(["c50 TTFT p99 within 5 ms of bare", dp99 <= 5, `${dp99.toFixed(2)} ms`]);
  } else if (name === "sat") {
    const ratio = gw.rps / bare.rps;
    out.push(["saturation throughput ≥ 0.9 × bare", ratio >= 0.9, `${ratio.toFixed(3)}×`]);
  }
  const kv = r["llmgw+kv"];
  if (kv && name !== "sat") {
    const added = kv.ttft_p50_ms - gw.ttft_p50_ms;
    out.push([`${name} precise-prefix (llmgw+kv) TTFT p50 within 1 ms of llmgw`, added <= 1, `${added.toFixed(2)} ms`]);
  }
  if ((name === "c10" || name === "c50") && gw.main_cpu_us_per_req !== null && bare.main_cpu_us_per_req !== null) {
    const ratio = gw.main_cpu_us_per_req / bare.main_cpu_us_per_req;
    out.push([
      `${name} main-thread CPU/request ≤ 1.5 × bare`,
      ratio <= 1.5,
      `${gw.main_cpu_us_per_req.toFixed(0)} vs ${bare.main_cpu_us_per_req.toFixed(0)} µs (${ratio.toFixed(2)}×)`,
    ]);
  }
  if (gw.scheduler_messages_per_req !== null)
    out.push([`${name} scheduler messages per request = 0`, gw.scheduler_messages_per_req === 0, gw.scheduler_messages_per_req.toFixed(3)]);
  return out;
}

/**
 * llmgw's main-thread CPU per request split at the floor of its relay
 * (bare-http1: an observed stream relayed from llmgw's HTTP/1.1 client,
 * nothing else), and what llmgw does beyond it. Undefined where a figure is
 * missing.
 */
function relayFloor(r: Record<string, PathResult>): { floor_x_bare: number; llmgw_over_floor_us: number; llmgw_over_floor_x_bare: number } | undefined {
  const bare = r.bare?.main_cpu_us_per_req;
  const floor = r["bare-http1"]?.main_cpu_us_per_req;
  const gw = r.llmgw?.main_cpu_us_per_req;
  if (bare == null || floor == null || gw == null || bare <= 0) return undefined;
  return { floor_x_bare: floor / bare, llmgw_over_floor_us: gw - floor, llmgw_over_floor_x_bare: (gw - floor) / bare };
}

export const overheadScenario: BenchScenario = {
  name: "overhead",
  summary: "latency and CPU llmgw adds: direct vs nginx vs bare Bun vs llmgw, interleaved",
  usage: USAGE,
  options: {
    cases: { type: "string" },
    rounds: { type: "string" },
    requests: { type: "string" },
    engines: { type: "string" },
    baseline: { type: "string" },
    "cpu-prof": { type: "string" },
  },
  async run(args) {
    const names = (stringFlag(args, "cases") ?? "c10,c50,sat,kv").split(",").map((s) => s.trim());
    for (const n of names) if (!(n in CASES)) throw new UsageError(`--cases: unknown case '${n}' (expected ${Object.keys(CASES).join(", ")})`);
    const rounds = numberFlag(args, "rounds", 5, { min: 1, max: 100, integer: true });
    const requests = numberFlag(args, "requests", 400, { min: 10, max: 100_000, integer: true });
    const engines = numberFlag(args, "engines", 3, { min: 1, max: 16, integer: true });
    const json = boolFlag(args, "json");
    const say = (s: string) => {
      if (!json) console.error(s);
    };
    say(`starting ${engines} sim-engines, nginx, a bare Bun proxy and three gateways…`);
    const baselineDir = stringFlag(args, "baseline");
    const cpuProfDir = stringFlag(args, "cpu-prof");
    if (cpuProfDir !== undefined) mkdirSync(cpuProfDir, { recursive: true });
    const started = await startPaths(engines, say, baselineDir, cpuProfDir === undefined ? undefined : resolve(cpuProfDir));
    try {
      const report: Record<string, unknown> = { scenario: "overhead", engines, rounds, requests_per_round: requests, cases: {} as Record<string, unknown> };
      const checks: [string, boolean, string][] = [];
      const floors: [string, NonNullable<ReturnType<typeof relayFloor>>][] = [];
      for (const name of names as CaseName[]) {
        const c = CASES[name];
        await Promise.all(
          started.sims.map((s) =>
            fetch(`${s.urls.api}/sim/config`, {
              method: "POST",
              body: JSON.stringify({ itl_ms: c.itlMs, prefill_overhead_ms: c.prefillMs, prefill_ms_per_token: 0 }),
            }),
          ),
        );
        const body = c.longPrompt
          ? (i: number) =>
              JSON.stringify({
                model: MODEL,
                stream: true,
                max_tokens: c.tokens,
                messages: [
                  { role: "system", content: SHARED_SYSTEM },
                  { role: "user", content: `Where are the hinges? (${i})` },
                ],
              })
          : JSON.stringify({ model: MODEL, stream: true, max_tokens: c.tokens, messages: [{ role: "user", content: "Say something short." }] });
        say(`  ${c.what}…`);
        const r = await comparePaths(started.paths, { concurrency: c.concurrency, requestsPerRound: Math.max(requests, c.concurrency * 2), rounds, body });
        const floor = relayFloor(r);
        (report.cases as Record<string, unknown>)[name] = { ...c, paths: r, ...(floor ? { relay_floor: floor } : {}) };
        if (floor) floors.push([name, floor]);
        checks.push(...targets(name, r));
        if (!json) console.log(`\n${table(name, r)}`);
      }
      report.targets = checks.map(([what, met, detail]) => ({ what, met, detail }));
      if (json) console.log(JSON.stringify(report));
      else {
        console.log("\ntargets:");
        for (const [what, met, detail] of checks) console.log(`  ${met ? "met    " : "NOT MET"}  ${what}: ${detail}`);
        if (floors.length > 0) {
          console.log("\nmain-thread CPU per request, split (bare-http1: bare Bun relaying the bytes from llmgw's HTTP/1.1 client, observing nothing):");
          for (const [name, f] of floors)
            console.log(
              `  ${name}: the relay floor ${f.floor_x_bare.toFixed(2)} × bare; llmgw's own work above it ${f.llmgw_over_floor_us.toFixed(0)} µs (${f.llmgw_over_floor_x_bare.toFixed(2)} × bare)`,
            );
        }
      }
      return 0;
    } finally {
      await started.stop();
    }
  },
};

function table(name: CaseName, r: Record<string, PathResult>): string {
  const direct = r.direct!;
  const bare = r.bare!;
  const f = (v: number | null) => (v === null ? "—" : v);
  return formatTable({
    title: `llmgw bench overhead — ${CASES[name].what} (ms; "added" = minus direct; "vs bare" = minus bare Bun; CPU in µs per request)`,
    columns: [
      "path",
      "ttft p50",
      "ttft p99",
      "p50 added",
      "p99 added",
      "p50 vs bare",
      "p99 vs bare",
      "rps",
      "× direct",
      "× bare",
      "main CPU",
      "all CPU",
      "msgs/req",
      "errors",
    ],
    rows: Object.entries(r).map(([path, s]) => [
      path,
      s.ttft_p50_ms,
      s.ttft_p99_ms,
      s.ttft_p50_ms - direct.ttft_p50_ms,
      s.ttft_p99_ms - direct.ttft_p99_ms,
      s.ttft_p50_ms - bare.ttft_p50_ms,
      s.ttft_p99_ms - bare.ttft_p99_ms,
      s.rps,
      s.rps / direct.rps,
      s.rps / bare.rps,
      f(s.main_cpu_us_per_req),
      f(s.cpu_us_per_req),
      f(s.scheduler_messages_per_req),
      s.errors,
    ]),
  });
}
