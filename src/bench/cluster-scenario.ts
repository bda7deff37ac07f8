/**
 * `llmgw bench cluster`: what sharing state through Redis costs.
 * Three sim-engines; one gateway (embedded state), three gateways with
 * embedded state (no coordination), and three sharing a redis-server, all
 * running side by side and measured in interleaved rounds under the same
 * closed-loop streaming load. Reports each setup's CPU per request of each
 * gateway (all threads) — raw, and marginal: less what the gateway burns idle
 * (health polls, workers; with Redis also the lease and the demand exchange),
 * which three gateways pay three times — the coordination overhead (target
 * < 10 %), Redis commands per request (target < 0.1), and the quota error: a
 * tenant hammered through the three Redis gateways against what one bucket
 * allows.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ClusterStatus } from "../protocol/cluster-status.ts";
import { boolFlag, numberFlag } from "../shared/flags.ts";
import { type LlmgwChild, spawnLlmgw, writeGatewayConfig } from "../shared/llmgw-child.ts";
import { startClosedLoopLoad } from "./closed-loop-load.ts";
import { cpuDelta, cpuSample } from "./proc-cpu.ts";
import { startRedisProcess } from "./redis-process.ts";
import { formatTable } from "./report.ts";
import type { BenchScenario } from "./scenario.ts";

const MODEL = "bench-model";
const LOAD_KEY = "cluster-bench-load-key";
const QUOTA_KEY = "cluster-bench-quota-key";
const SETUPS = ["1 gateway", "3 gateways, embedded", "3 gateways, redis"] as const;
/** How long every gateway is watched with no traffic, for its background CPU. */
const IDLE_MS = 3_000;
type SetupName = (typeof SETUPS)[number];

export interface ClusterBenchOptions {
  clients: number;
  holdMs: number;
  rounds: number;
  maxTokens: number;
  quotaMs: number;
  quotaRpm: number;
  /**
   * Rounds are added, all setups again in turn, until every setup served this
   * many requests (at most MAX_EXTRA_ROUNDS more): per-request figures need
   * enough requests, and a busy host serves fewer in the same time. Default 0.
   */
  minRequests?: number;
  log?: (line: string) => void;
}

const MAX_EXTRA_ROUNDS = 8;

export interface SetupReport {
  setup: SetupName;
  gateways: number;
  requests: number;
  errors: number;
  /** Mean over the setup's gateways of CPU (all threads) per request served, µs. */
  cpu_us_per_request: number;
  /** Per gateway, µs per request. */
  cpu_us_per_request_each: number[];
  /** Mean CPU per request less the gateway's idle CPU over the same time, µs. */
  marginal_cpu_us_per_request: number;
  /** Mean idle CPU of one of its gateways, ms per second. */
  idle_cpu_ms_per_s: number;
  /**
   * Redis commands per request (all gateways) less the background rate measured
   * idle over the same time: what a request costs, whatever the throughput the
   * host allowed; null without Redis.
   */
  redis_commands_per_request: number | null;
  /** The same with the background included (it grows as fewer requests share it). */
  redis_commands_per_request_raw: number | null;
  /** Redis commands the setup's gateways send with no traffic (leases, quota sync, demand exchange), per second. */
  redis_background_commands_per_s: number | null;
}

export interface ClusterBenchReport {
  scenario: "cluster";
  clients: number;
  rounds: number;
  hold_ms: number;
  setups: SetupReport[];
  /** Marginal CPU per request, three Redis gateways over three embedded ones, minus 1 (target < 0.10). */
  coordination_overhead: number;
  /** The same against one gateway. */
  overhead_vs_one_gateway: number;
  /** Raw CPU per request (idle cost included), Redis vs embedded, three gateways each. */
  raw_coordination_overhead: number;
  quota: { rpm: number; window_ms: number; admitted: number; allowed: number; error: number; refused: number };
}

interface Setup {
  name: SetupName;
  gws: LlmgwChild[];
  requests: number;
  errors: number;
  cpuNs: number[];
  served: number[];
  commands: number;
  /** Redis commands per ms with no traffic, all the setup's gateways together. */
  idleCommandsPerMs: number;
  /** ns of CPU per ms idle, per gateway. */
  idleRate: number[];
  loadedMs: number;
}

async function clusterStatus(gw: LlmgwChild): Promise<ClusterStatus> {
  return (await (await fetch(`${gw.urls.admin}/admin/v1/cluster`)).json()) as ClusterStatus;
}

async function redisCommands(s: Setup): Promise<number> {
  if (s.name !== "3 gateways, redis") return 0;
  return (await Promise.all(s.gws.map(clusterStatus))).reduce((n, c) => n + c.redis.commands, 0);
}

/** One round of a setup: the same total concurrency split over its gateways, each gateway's CPU measured. */
async function measure(s: Setup, o: ClusterBenchOptions): Promise<void> {
  const per = Math.ceil(o.clients / s.gws.length);
  const body = JSON.stringify({
    model: MODEL,
    stream: true,
    max_tokens: o.maxTokens,
    messages: [{ role: "user", content: "a question for the cluster bench" }],
  });
  const cpuBefore = s.gws.map((g) => cpuSample(g.proc.pid));
  const commandsBefore = await redisCommands(s);
  const started = performance.now();
  const loads = s.gws.map((g) =>
    startClosedLoopLoad({ url: `${g.urls.api}/v1/chat/completions`, clients: per, bodies: [body], headers: { authorization: `Bearer ${LOAD_KEY}` } }),
  );
  await Bun.sleep(o.holdMs);
  const counts = await Promise.all(loads.map((l) => l.stop()));
  s.loadedMs += performance.now() - started;
  s.gws.forEach((g, i) => {
    s.cpuNs[i]! += cpuDelta(cpuBefore[i], cpuSample(g.proc.pid))?.totalNs ?? Number.NaN;
    s.served[i]! += counts[i]!.completed;
  });
  s.requests += counts.reduce((n, c) => n + c.completed, 0);
  s.errors += counts.reduce((n, c) => n + c.errors, 0);
  s.commands += (await redisCommands(s)) - commandsBefore;
}

/** Hammer the limited tenant through every gateway for `ms`: admitted vs a bucket's burst plus its refill. */
async function quotaError(gws: readonly LlmgwChild[], o: ClusterBenchOptions): Promise<ClusterBenchReport["quota"]> {
  let admitted = 0;
  let refused = 0;
  let next = 0;
  const started = Date.now();
  const body = JSON.stringify({ model: MODEL, max_tokens: 1, messages: [{ role: "user", content: "q" }] });
  await Promise.all(
    Array.from({ length: 12 }, async () => {
      while (Date.now() - started < o.quotaMs) {
        const gw = gws[next++ % gws.length]!;
        const res = await fetch(`${gw.urls.api}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${QUOTA_KEY}` },
          body,
        });
        await res.arrayBuffer();
        if (res.status === 200) admitted++;
        else if (res.status === 429) {
          refused++;
          await Bun.sleep(5);
        }
      }
    }),
  );
  const windowMs = Date.now() - started;
  const allowed = o.quotaRpm + (o.quotaRpm / 60_000) * windowMs;
  return { rpm: o.quotaRpm, window_ms: windowMs, admitted, allowed: Math.round(allowed), error: (admitted - allowed) / allowed, refused };
}

export async function runClusterBench(o: ClusterBenchOptions): Promise<ClusterBenchReport> {
  const log = o.log ?? (() => {});
  const dir = mkdtempSync(join(tmpdir(), "llmgw-bench-cluster-"));
  const children: LlmgwChild[] = [];
  const redis = await startRedisProcess();
  try {
    const sims = await Promise.all(
      [0, 1, 2].map(() => spawnLlmgw(["sim-engine", "--port", "0", "--model", MODEL, "--itl-ms", "5", "--prefill-overhead-ms", "1", "--max-num-seqs", "256"])),
    );
    children.push(...sims);
    const base = {
      health: { poll_interval_ms: 100 },
      endpoints: sims.map((s, i) => ({ id: `sim-${i}`, url: s.urls.api })),
      auth: {
        keys: [
          { key: LOAD_KEY, tenant: "load" },
          { key: QUOTA_KEY, tenant: "limited" },
        ],
      },
      // The load tenant has a quota too (far above what it uses): its requests take the shared-quota path.
      tenants: [
        { name: "load", requests_per_minute: 10_000_000, tokens_per_minute: 1_000_000_000 },
        { name: "limited", requests_per_minute: o.quotaRpm },
      ],
    };
    const gateway = async (name: string, redisState: boolean) => {
      const config = { ...base, data_dir: join(dir, name), ...(redisState ? { state: { backend: "redis", redis_url: redis.url, gateway_id: name } } : {}) };
      const gw = await spawnLlmgw(["serve", "--config", writeGatewayConfig(config)], { waitFor: 2, timeoutMs: 20_000 });
      children.push(gw);
      return gw;
    };
    log("starting 1 + 3 + 3 gateways in front of 3 sim-engines");
    const setups: Setup[] = [];
    for (const [name, n, shared] of [
      [SETUPS[0], 1, false],
      [SETUPS[1], 3, false],
      [SETUPS[2], 3, true],
    ] as const) {
      const gws = await Promise.all(Array.from({ length: n }, (_, i) => gateway(`${shared ? "redis" : n === 1 ? "one" : "embedded"}-${i}`, shared)));
      setups.push({
        name,
        gws,
        requests: 0,
        errors: 0,
        cpuNs: gws.map(() => 0),
        served: gws.map(() => 0),
        commands: 0,
        idleCommandsPerMs: 0,
        idleRate: gws.map(() => 0),
        loadedMs: 0,
      });
    }
    for (const s of setups) {
      for (const g of s.gws) {
        const deadline = Date.now() + 20_000;
        while (
          !(await fetch(`${g.urls.admin}/readyz`).then(
            (r) => r.ok,
            () => false,
          ))
        ) {
          if (Date.now() > deadline) throw new Error(`gateway ${g.urls.admin} not ready`);
          await Bun.sleep(50);
        }
      }
    }
    // One request through each gateway first: scripts loaded into Redis and the first quota allowance fetched are start-up, not the common path.
    const warm = JSON.stringify({ model: MODEL, max_tokens: 1, messages: [{ role: "user", content: "warm-up" }] });
    for (const g of setups.flatMap((s) => s.gws)) {
      const res = await fetch(`${g.urls.api}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${LOAD_KEY}` },
        body: warm,
      });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`warm-up request through ${g.urls.api}: HTTP ${res.status}`);
    }
    log(`idle: ${IDLE_MS} ms with no traffic, every gateway's background CPU`);
    const all = setups.flatMap((s) => s.gws);
    const idleBefore = all.map((g) => cpuSample(g.proc.pid));
    const idleCommandsBefore = await Promise.all(setups.map(redisCommands));
    const idleStart = performance.now();
    await Bun.sleep(IDLE_MS);
    const idleMs = performance.now() - idleStart;
    const idleCommandsAfter = await Promise.all(setups.map(redisCommands));
    let k = 0;
    setups.forEach((s, i) => {
      s.idleRate = s.gws.map((g) => (cpuDelta(idleBefore[k++], cpuSample(g.proc.pid))?.totalNs ?? Number.NaN) / idleMs);
      s.idleCommandsPerMs = (idleCommandsAfter[i]! - idleCommandsBefore[i]!) / idleMs;
    });
    let rounds = 0;
    const short = () => setups.some((s) => s.requests < (o.minRequests ?? 0));
    while (rounds < o.rounds || (short() && rounds < o.rounds + MAX_EXTRA_ROUNDS)) {
      rounds++;
      for (const s of setups) {
        log(`round ${rounds}/${o.rounds}${rounds > o.rounds ? " (extra: too few requests so far)" : ""}: ${s.name}, ${o.clients} streams for ${o.holdMs} ms`);
        await measure(s, o);
      }
    }
    log(`quota: tenant at ${o.quotaRpm} rpm hammered through the 3 Redis gateways for ${o.quotaMs} ms`);
    const quota = await quotaError(setups[2]!.gws, o);
    const reports: SetupReport[] = setups.map((s) => {
      const each = s.cpuNs.map((ns, i) => ns / 1000 / Math.max(1, s.served[i]!));
      const marginal = s.cpuNs.map((ns, i) => (ns - s.idleRate[i]! * s.loadedMs) / 1000 / Math.max(1, s.served[i]!));
      return {
        setup: s.name,
        gateways: s.gws.length,
        requests: s.requests,
        errors: s.errors,
        cpu_us_per_request: each.reduce((a, b) => a + b, 0) / each.length,
        cpu_us_per_request_each: each,
        marginal_cpu_us_per_request: marginal.reduce((a, b) => a + b, 0) / marginal.length,
        idle_cpu_ms_per_s: s.idleRate.reduce((a, b) => a + b, 0) / s.idleRate.length / 1000,
        ...redisFigures(s),
      };
    });
    const [one, embedded, shared] = reports as [SetupReport, SetupReport, SetupReport];
    return {
      scenario: "cluster",
      clients: o.clients,
      rounds,
      hold_ms: o.holdMs,
      setups: reports,
      coordination_overhead: shared.marginal_cpu_us_per_request / embedded.marginal_cpu_us_per_request - 1,
      overhead_vs_one_gateway: shared.marginal_cpu_us_per_request / one.marginal_cpu_us_per_request - 1,
      raw_coordination_overhead: shared.cpu_us_per_request / embedded.cpu_us_per_request - 1,
      quota,
    };
  } finally {
    for (const c of [...children].reverse()) await c.stop();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Redis commands per request, net of the setup's idle rate and raw, and that rate itself. */
function redisFigures(s: Setup): Pick<SetupReport, "redis_commands_per_request" | "redis_commands_per_request_raw" | "redis_background_commands_per_s"> {
  if (s.name !== "3 gateways, redis") return { redis_commands_per_request: null, redis_commands_per_request_raw: null, redis_background_commands_per_s: null };
  const requests = Math.max(1, s.requests);
  return {
    redis_commands_per_request: Math.max(0, s.commands - s.idleCommandsPerMs * s.loadedMs) / requests,
    redis_commands_per_request_raw: s.commands / requests,
    redis_background_commands_per_s: s.idleCommandsPerMs * 1000,
  };
}

const USAGE = `usage: llmgw bench cluster [--clients N] [--hold-ms MS] [--rounds N] [--max-tokens N]
                           [--quota-ms MS] [--quota-rpm N] [--json]

Three sim-engines; one gateway, three gateways with embedded state, and three
gateways sharing a redis-server (needs redis-server on PATH), measured in
interleaved rounds under the same closed-loop streaming load split over each
setup's gateways. Prints CPU per request of each gateway (all its threads),
raw and marginal (less the CPU it burns idle, measured first), the
coordination overhead of Redis on the marginal cost (three Redis gateways vs
three embedded, and vs one gateway; target < 10 %), Redis commands per
request (less the background rate measured idle; target < 0.1; raw beside
it) and per second with no traffic, and the quota error of a
tenant hammered through the three Redis gateways (admitted vs its bucket's
burst plus refill).

flags:
  --clients N     concurrent streams per setup, split over its gateways (default 24)
  --hold-ms MS    load per setup and round (default 4000)
  --rounds N      interleaved rounds (default 2)
  --max-tokens N  tokens per streamed answer (default 16; 5 ms each)
  --quota-ms MS   how long the limited tenant is hammered (default 8000)
  --quota-rpm N   its requests per minute (default 600)
  --json          one JSON object instead of the table`;

export const clusterScenario: BenchScenario = {
  name: "cluster",
  summary: "1 vs 3 gateways, embedded vs sharing Redis: CPU per request, Redis commands per request, quota error",
  usage: USAGE,
  options: {
    clients: { type: "string" },
    "hold-ms": { type: "string" },
    rounds: { type: "string" },
    "max-tokens": { type: "string" },
    "quota-ms": { type: "string" },
    "quota-rpm": { type: "string" },
  },
  async run(args) {
    const json = boolFlag(args, "json");
    const r = await runClusterBench({
      clients: numberFlag(args, "clients", 24, { min: 3, max: 600, integer: true }),
      holdMs: numberFlag(args, "hold-ms", 4_000, { min: 500, max: 600_000, integer: true }),
      rounds: numberFlag(args, "rounds", 2, { min: 1, max: 20, integer: true }),
      maxTokens: numberFlag(args, "max-tokens", 16, { min: 1, max: 4096, integer: true }),
      quotaMs: numberFlag(args, "quota-ms", 8_000, { min: 1_000, max: 600_000, integer: true }),
      quotaRpm: numberFlag(args, "quota-rpm", 600, { min: 60, max: 1_000_000, integer: true }),
      log: json ? undefined : (l) => console.error(l),
    });
    if (json) {
      console.log(JSON.stringify(r));
    } else {
      const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
      console.log(
        formatTable({
          title: `llmgw bench cluster — 3 sim-engines, ${r.clients} streams per setup, ${r.rounds} interleaved rounds of ${r.hold_ms} ms`,
          columns: [
            "setup",
            "requests",
            "errors",
            "CPU µs/request",
            "each gateway",
            "idle CPU ms/s",
            "marginal µs/request",
            "Redis commands/request",
            "raw",
            "idle Redis commands/s",
          ],
          rows: r.setups.map((s) => [
            s.setup,
            s.requests,
            s.errors,
            s.cpu_us_per_request,
            s.cpu_us_per_request_each.map((x) => x.toFixed(0)).join(" / "),
            s.idle_cpu_ms_per_s,
            s.marginal_cpu_us_per_request,
            s.redis_commands_per_request ?? "-",
            s.redis_commands_per_request_raw ?? "-",
            s.redis_background_commands_per_s ?? "-",
          ]),
        }),
      );
      console.log(
        `\ncoordination overhead, marginal CPU per request (3 Redis vs 3 embedded gateways): ${pct(r.coordination_overhead)} (target < 10 %); vs one gateway: ${pct(r.overhead_vs_one_gateway)}; raw (idle cost included): ${pct(r.raw_coordination_overhead)}`,
      );
      const q = r.quota;
      console.log(
        `quota: ${q.admitted} admitted in ${q.window_ms} ms at ${q.rpm} rpm, the bucket allows ${q.allowed}: error ${pct(q.error)} (${q.refused} refused)`,
      );
    }
    return r.setups.every((s) => s.errors === 0) ? 0 : 1;
  },
};
