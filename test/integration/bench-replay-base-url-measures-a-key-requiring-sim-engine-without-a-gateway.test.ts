/**
 * Scenario: `llmgw bench replay --base-url` pointed at a sim-engine started
 * with `--api-key` (as `vllm serve --api-key`), on loopback. The bench
 * starts no gateway and no sim-engine of its own (its descendants are
 * watched while it runs), names the model the server lists, sends the key
 * from LLMGW_BENCH_API_KEY or --api-key, and its JSON has vLLM's flat keys
 * with sane values: every request completed, the trace's tokens exactly,
 * throughput > 0, TTFT ≤ E2EL. Without the key it stops at /v1/models with
 * a message saying so; with --model and no key every request is a 401.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ReplayReport } from "../../src/bench/replay/replay-report.ts";
import { childEnv } from "../../src/shared/process-env.ts";
import { CLI, REPO_ROOT, type Started, startLlmgw, stopAll } from "../helpers/processes.ts";

const KEY = "sk-bench-test-0123";
const REQUESTS = 12;
const dir = mkdtempSync(join(tmpdir(), "replay-base-url-"));
const tracePath = join(dir, "trace.csv");
let sim: Started;
let inputTokens = 0;
let outputTokens = 0;

beforeAll(async () => {
  // An Azure-format trace written as RFC 4180 allows: a quoted header, a quoted timestamp, CRLF.
  const rows = ['"TIMESTAMP","ContextTokens","GeneratedTokens"'];
  for (let i = 0; i < REQUESTS; i++) {
    const input = 16 + 8 * i;
    const output = 4 + (i % 5);
    inputTokens += input;
    outputTokens += output;
    rows.push(`"2023-11-16 18:15:${String(40 + Math.floor(i / 6)).padStart(2, "0")}.${String((i % 6) * 150).padStart(3, "0")}",${input},${output}`);
  }
  writeFileSync(tracePath, `${rows.join("\r\n")}\r\n`);
  sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "served-model", "--api-key", KEY, "--itl-ms", "2"]);
});

afterAll(async () => {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
});

/** Every process below `root`, by /proc's parent links. */
function descendants(root: number): number[] {
  const parent = new Map<number, number>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // The field after the parenthesised name (which may hold spaces) is the state, then the ppid.
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // it exited meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [pid, pp] of parent)
      if (pp === p) {
        out.push(pid);
        walk(pid);
      }
  };
  walk(root);
  return out;
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim();
  } catch {
    return "";
  }
}

/** `llmgw bench replay … --json` with `env`, the command lines of every process it started seen while it ran. */
async function replay(args: string[], env: Record<string, string> = {}): Promise<{ code: number; out: string; err: string; children: string[] }> {
  const proc = Bun.spawn([process.execPath, CLI, "bench", "replay", "--trace", tracePath, ...args, "--json"], {
    cwd: REPO_ROOT,
    env: childEnv({ LLMGW_PARENT_PID: String(process.pid), ...env }),
    stdout: "pipe",
    stderr: "pipe",
  });
  const children = new Set<string>();
  let running = true;
  const watching = (async () => {
    while (running) {
      for (const pid of descendants(proc.pid)) {
        const c = cmdline(pid);
        if (c !== "") children.add(c);
      }
      await Bun.sleep(25);
    }
  })();
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  running = false;
  await watching;
  return { code, out, err, children: [...children] };
}

function report(r: { code: number; out: string; err: string }): ReplayReport {
  expect({ code: r.code, err: r.code === 0 ? "" : r.err.slice(-2000) }).toEqual({ code: 0, err: "" });
  return JSON.parse(r.out.trim().split("\n").at(-1)!) as ReplayReport;
}

test("the sim-engine with --api-key refuses /v1 without the key as vLLM does, and leaves /health open", async () => {
  const bare = await fetch(`${sim.url}/v1/models`);
  expect([bare.status, await bare.json()]).toEqual([401, { error: "Unauthorized" }]);
  const wrong = await fetch(`${sim.url}/v1/models`, { headers: { authorization: "Bearer nope" } });
  expect(wrong.status).toBe(401);
  const right = await fetch(`${sim.url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } });
  expect(right.status).toBe(200);
  expect((await fetch(`${sim.url}/health`)).status).toBe(200);
});

test("bench replay --base-url with the key from the environment: vLLM's flat keys, sane values, no gateway or sim-engine started", async () => {
  const before = await (await fetch(`${sim.url}/metrics`)).text();
  const run = await replay(["--base-url", `${sim.url}/v1/`, "--speedup", "2"], { LLMGW_BENCH_API_KEY: KEY });
  const r = report(run);
  // Nothing but the load process ran below the bench: no gateway (serve), no sim-engine.
  expect(run.children.some((c) => c.includes("open-loop-driver"))).toBe(true);
  expect(run.children.filter((c) => / (serve|sim-engine)( |$)/.test(c))).toEqual([]);

  expect([r.target, r.base_url, r.model_id, r.num_prompts, r.engines]).toEqual(["base-url", sim.url, "served-model", REQUESTS, undefined]);
  expect([r.completed, r.failed, r.short_answers]).toEqual([REQUESTS, 0, 0]);
  expect([r.total_input_tokens, r.total_output_tokens]).toEqual([inputTokens, outputTokens]);
  expect(r.duration).toBeGreaterThan(0);
  for (const k of ["request_throughput", "output_throughput", "total_token_throughput"] as const)
    expect({ k, positive: r[k] > 0 }).toEqual({ k, positive: true });
  expect(r.total_token_throughput).toBeCloseTo(r.output_throughput + inputTokens / r.duration, 6);
  expect(r.max_concurrent_requests).toBeGreaterThanOrEqual(1);
  // Each request's TTFT ≤ its E2EL, so every statistic of order keeps it too.
  for (const s of ["mean", "median", "p90", "p99"] as const)
    expect({ s, ttftBelowE2el: r[`${s}_ttft_ms`]! <= r[`${s}_e2el_ms`]! }).toEqual({ s, ttftBelowE2el: true });
  for (const m of ["ttft", "tpot", "itl", "e2el"] as const) {
    expect({ m, mean: r[`mean_${m}_ms`] > 0, std: r[`std_${m}_ms`] >= 0 }).toEqual({ m, mean: true, std: true });
    expect(r[`median_${m}_ms`]).toBeLessThanOrEqual(r[`p99_${m}_ms`]!);
  }
  // No gateway in front: no endpoint named, no engine counters read.
  expect(r.endpoints.map((e) => [e.id, e.requests, e.errors, "engine" in e])).toEqual([["-", REQUESTS, 0, false]]);
  expect(r.error_kinds).toEqual([]);
  // The server itself answered them all (its own counter moved by exactly the trace's requests).
  const count = (text: string) => [...text.matchAll(/^vllm:request_success_total\{[^}]*\} (\S+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
  expect(count(await (await fetch(`${sim.url}/metrics`)).text()) - count(before)).toBe(REQUESTS);
}, 120_000);

test("--api-key and --model on the command line, and the percentiles asked", async () => {
  const r = report(await replay(["--base-url", sim.url, "--api-key", KEY, "--model", "served-model", "--speedup", "4", "--metric-percentiles", "50,99.9"]));
  expect([r.completed, r.failed, r.model_id]).toEqual([REQUESTS, 0, "served-model"]);
  expect(r.metric_percentiles).toEqual([50, 99.9]);
  expect(r.p50_ttft_ms).toBe(r.median_ttft_ms);
  expect(typeof r["p99.9_itl_ms"]).toBe("number");
}, 120_000);

test("without the key: stopped at /v1/models with what to do; with --model, every request is a 401", async () => {
  const refused = await replay(["--base-url", sim.url]);
  expect(refused.code).toBe(2);
  expect(refused.err).toContain("answered 401");
  expect(refused.err).toContain("--api-key or LLMGW_BENCH_API_KEY");
  expect(refused.err).not.toContain(KEY);

  const r = report(await replay(["--base-url", sim.url, "--model", "served-model", "--speedup", "4"]));
  expect([r.completed, r.failed, r.error_kinds]).toEqual([0, REQUESTS, [{ error: "HTTP 401", count: REQUESTS }]]);
  expect(r.mean_ttft_ms).toBeNull();
}, 120_000);

test("fleet flags are refused with --base-url, and --api-key without it", async () => {
  for (const [args, message] of [
    [["--base-url", sim.url, "--engines", "2"], "--engines shapes the fleet the bench starts; with --base-url it starts none"],
    [["--api-key", KEY], "--api-key goes with --base-url"],
    [["--base-url", "ftp://x"], "--base-url: expected http:// or https://"],
  ] as const) {
    const r = await replay([...args]);
    expect({ args, code: r.code, said: r.err.includes(message) ? message : r.err.slice(0, 300) }).toEqual({ args, code: 2, said: message });
  }
}, 60_000);
