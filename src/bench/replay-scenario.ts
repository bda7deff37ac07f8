/**
 * `llmgw bench replay`: a production trace (Azure LLM inference 2023, or
 * Mooncake's with prefix-block hashes) replayed open-loop at its recorded
 * arrival times onto sim-engines behind one llmgw gateway, or onto any
 * OpenAI-compatible server named by --base-url (nothing started). Streaming
 * /v1/completions: the trace records raw token counts, and a raw prompt is
 * exactly as many tokens as the trace says (a chat template would add its
 * own) and keeps each Mooncake block on the engine's block boundaries.
 * Reports TTFT, TPOT, ITL and E2EL in `vllm bench serve`'s names, goodput
 * under an SLO, the load each endpoint took, errors, how late the sends
 * were; --report writes a
 * self-contained HTML page with charts over time.
 */
import { writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { boolFlag, numberFlag, stringFlag, UsageError } from "../shared/flags.ts";
import { DEFAULT_BLOCK_SIZE_TOKENS } from "../sim/config.ts";
import { resolveProfile } from "../sim/profiles/catalog.ts";
import { TwinFleetManager } from "../twin/twin-fleet-manager.ts";
import { engineClockReport, STRICT_USAGE, sampleEngineClocks, strictVerdict } from "./engine-clock-report.ts";
import { gitCommit } from "./git-commit.ts";
import { MAX_TRACE_FILE_BYTES } from "./input-file.ts";
import { progressPrinter } from "./progress-line.ts";
import { renderReplayHtml } from "./replay/html-report.ts";
import { type OpenLoopProgress, type OpenLoopResult, type ScheduledRequest, startOpenLoop } from "./replay/open-loop-driver.ts";
import { traceSegments } from "./replay/prompt-text.ts";
import { gatewayFailureCounts, realTimeFaults, scheduleRealTimeKills } from "./replay/real-time-faults.ts";
import { type EndpointReport, formatReplayText, type ReplayReport } from "./replay/replay-report.ts";
import { type FleetTarget, type ReplayTarget, startTarget } from "./replay/replay-target.ts";
import { formatReplayTwinCheck, replayTwinCheck } from "./replay/replay-twin-check.ts";
import { BENCH_API_KEY_ENV, serverRoot } from "./replay/server-target.ts";
import { DEFAULT_METRIC_PERCENTILES, type EndpointLoad, summarize } from "./replay/summary.ts";
import { timeline } from "./replay/timeline.ts";
import { type Trace, tracePrefixShare, traceWindow, type WindowRequest } from "./replay/trace.ts";
import { loadTrace, SHIPPED_TRACES, tracePath } from "./replay/trace-files.ts";
import { replayInTwin } from "./replay/twin-target.ts";
import type { BenchScenario } from "./scenario.ts";
import { splitArgs } from "./sim-fleet.ts";
import { failuresOf, faultsFlag, faultUsage } from "./twin-faults.ts";

export const DEFAULT_SPEEDUP = 1;
export const DEFAULT_DURATION_S = 300;
export const DEFAULT_ENGINES = 4;
export const DEFAULT_SLO_TTFT_MS = 2_000;
export const DEFAULT_SLO_TPOT_MS = 100;
export const DEFAULT_DRAIN_S = 60;
/**
 * The sim-engine profile every engine gets unless --engine-args says
 * otherwise: Llama-3.1-8B on an H100 80GB, the profile the sim's constants
 * were fitted to (a published H100 sweep), the size most chat services
 * deploy, and the model Azure's and Mooncake's prompts fit: its KV cache
 * (442,768 tokens, derived as vLLM sizes it) and context (131,072) come from
 * the profile.
 */
export const DEFAULT_REPLAY_PROFILE = "h100-llama-3.1-8b";
/** Engines a twin run may have (the real-time run is held to what one host can start). */
const MAX_TWIN_ENGINES = 1024;

export interface ReplayOptions {
  trace: Trace;
  startS: number;
  durationS: number;
  speedup: number;
  target: ReplayTarget;
  slo: { ttftMs: number; tpotMs: number };
  /** The pN_*_ms keys to report (vLLM's --metric-percentiles). */
  percentiles: readonly number[];
  drainS: number;
  progress?: (line: string, final: boolean) => void;
}

/**
 * The flags every engine gets before --engine-args: the profile, and a
 * context raised past the model's own only when the window holds a longer
 * request (a Mooncake window can: one of 135,155 tokens), so none is refused
 * for its length; the KV cache stays the profile's.
 */
export function replayEngineDefaults(requests: readonly WindowRequest[], profile = DEFAULT_REPLAY_PROFILE): string[] {
  let longest = 0;
  for (const r of requests) longest = Math.max(longest, r.inputTokens + r.outputTokens);
  const context = resolveProfile({ profile }).profile.maxModelLen;
  if (longest <= context) return ["--profile", profile];
  const blockSize = DEFAULT_BLOCK_SIZE_TOKENS;
  return ["--profile", profile, "--max-model-len", String(Math.ceil((longest + 1) / blockSize) * blockSize)];
}

export function schedule(requests: readonly WindowRequest[], speedup: number): ScheduledRequest[] {
  return requests.map((r) => ({ atMs: r.atMs / speedup, segments: traceSegments(r, r.index), maxTokens: r.outputTokens }));
}

function progressLine(p: OpenLoopProgress, total: number, runS: number): string {
  return `replay: ${(p.elapsedMs / 1000).toFixed(0)} s (last send at ${runS.toFixed(0)} s)  sent ${p.sent}/${total}  done ${p.done}  in flight ${p.inFlight}  errors ${p.errors}`;
}

export async function runReplay(o: ReplayOptions): Promise<ReplayReport> {
  const window = traceWindow(o.trace, o.startS, o.durationS);
  if (window.length === 0)
    throw new UsageError(
      `no requests in ${o.trace.name} between ${o.startS} s and ${o.startS + o.durationS} s (the trace spans ${(o.trace.spanMs / 1000).toFixed(0)} s)`,
    );
  const requests = schedule(window, o.speedup);
  const runS = requests[requests.length - 1]!.atMs / 1000;
  const onProgress = (p: OpenLoopProgress) => o.progress?.(progressLine(p, requests.length, runS), false);
  if (o.target.kind === "twin") {
    let stopped = false;
    const onSigint = () => {
      stopped = true;
    };
    process.on("SIGINT", onSigint);
    try {
      const tw = await replayInTwin(o.target, replayEngineDefaults(window), requests, o.drainS * 1000, onProgress, () => stopped);
      return replayReport(o, window, requests, tw.result, tw.model, tw.settings, tw.endpoints);
    } finally {
      process.off("SIGINT", onSigint);
    }
  }
  const target = await startTarget(o.target, replayEngineDefaults(window));
  try {
    const clockBefore = await sampleEngineClocks(target.engineUrls);
    const load = startOpenLoop({ url: target.url, model: target.model, requests, drainMs: o.drainS * 1000 }, onProgress, target.secretHeaders);
    // Faults are timed from the load's start, as the twin times them from its first instant.
    const faults = o.target.kind === "llmgw" ? o.target.faults : undefined;
    const kills = target.fleet && faults ? scheduleRealTimeKills(target.fleet.engines, faults, target.fleet) : undefined;
    const onSigint = () => load.stop();
    process.on("SIGINT", onSigint);
    const result = await load.done.finally(() => process.off("SIGINT", onSigint));
    const clock = engineClockReport(clockBefore, await sampleEngineClocks(target.engineUrls));
    const report = replayReport(o, window, requests, result, target.model, target.settings, (loads) => loads);
    report.endpoints = await target.endpoints(report.endpoints);
    if (target.engineUrls.length > 0) report.engine_clock = clock;
    if (kills && target.fleet) {
      await kills.finish();
      const counts = await gatewayFailureCounts(target.fleet.adminUrl);
      report.failures = failuresOf(result.records, counts.retries, counts.recoveries, kills.outcomes);
    }
    return report;
  } finally {
    await target.stop();
  }
}

/** The report of a run, whichever target ran it; `endpoints` completes each endpoint's row. */
function replayReport(
  o: ReplayOptions,
  window: readonly WindowRequest[],
  requests: readonly ScheduledRequest[],
  result: OpenLoopResult,
  model: string,
  settings: Partial<ReplayReport>,
  endpoints: (loads: EndpointLoad[]) => EndpointReport[],
): ReplayReport {
  o.progress?.(`replay: done in ${(result.wallMs / 1000).toFixed(1)} s, ${result.records.length} requests`, true);
  const commit = gitCommit();
  const share = tracePrefixShare(window);
  const summary = summarize(result.records, result.itl, result.wallMs, o.slo, (id) => requests[id]!.maxTokens, o.percentiles);
  return {
    scenario: "replay",
    target: o.target.kind,
    model_id: model,
    num_prompts: window.length,
    trace: o.trace.name,
    trace_format: o.trace.format,
    trace_start_s: o.startS,
    trace_duration_s: o.durationS,
    speedup: o.speedup,
    ...(share === undefined ? {} : { trace_prefix_share: Math.round(share * 10_000) / 10_000 }),
    ...settings,
    date: new Date().toISOString(),
    ...(commit === undefined ? {} : { commit }),
    load_process_cpu_s: Math.round(result.cpuS * 100) / 100,
    load_process_cpu_share: result.wallMs > 0 ? Math.round((result.cpuS / (result.wallMs / 1000)) * 1000) / 1000 : NaN,
    ...summary,
    endpoints: endpoints(summary.endpoints),
    timeline: timeline(result.records, { speedup: o.speedup, startS: o.startS, durationS: Math.min(o.durationS, o.trace.spanMs / 1000 - o.startS) }),
  };
}

/** --metric-percentiles "90,99" → [90, 99]: each in (0, 100), as vLLM's. */
function percentilesFlag(raw: string | undefined): number[] {
  if (raw === undefined) return [...DEFAULT_METRIC_PERCENTILES];
  const list = raw.split(",").map((p) => p.trim());
  const out = list.map(Number);
  if (list.some((p) => p === "") || out.some((p) => !Number.isFinite(p) || p <= 0 || p >= 100))
    throw new UsageError(`--metric-percentiles: expected comma-separated percentiles between 0 and 100 (such as 50,90,99), got '${raw}'`);
  return [...new Set(out)];
}

const NAMES = Object.keys(SHIPPED_TRACES).join(", ");

/** A replica's start-up in a twin fleet of nodes, s: vLLM loading an 8B model's weights and compiling its graphs takes about a minute. */
const DEFAULT_STARTUP_S = 60;

const USAGE = `usage: llmgw bench replay --trace NAME|FILE [--speedup X] [--start S] [--duration S]
                          [--engines N] [--engine-args=FLAGS] [--gateway-config FILE]
                          [--base-url URL [--api-key KEY] [--model NAME]]
                          [--slo-ttft-ms MS] [--slo-tpot-ms MS] [--metric-percentiles LIST]
                          [--drain-s S] [--fault SPEC]… [--twin [--fleet NODESxGPUS[:TP] [--startup-s S]] | --check] [--report FILE.html] [--strict] [--json]

Replays a production trace open-loop: every request is sent at its recorded
arrival time (divided by --speedup) whether or not earlier ones have been
answered, from a load process of its own, onto sim-engines behind one llmgw
gateway, or with --base-url onto any OpenAI-compatible server (nothing is
started). Requests are streaming /v1/completions with max_tokens = the
trace's output length and ignore_eos, so each answer is as long as it was.
A Mooncake request's prompt is built block by block from its hash_ids (the
same id, the same 512 tokens of text), so prefix sharing is the trace's; an
Azure request gets a prompt of its own. Reports TTFT, TPOT, ITL and E2EL
(mean, median, std, percentiles; vllm bench serve's definitions and names),
throughput, goodput under the SLO, each endpoint's load and prefix-cache hit
rate, errors, and how late the sends were.

flags:
  --trace NAME|FILE      a shipped trace — ${Object.keys(SHIPPED_TRACES).slice(0, 2).join(", ")},
                         ${Object.keys(SHIPPED_TRACES).slice(2).join(", ")} (bench/traces/README.md) —
                         or a file: Azure CSV (RFC 4180), or Mooncake JSON lines (.jsonl);
                         a regular file of at most ${MAX_TRACE_FILE_BYTES / 1024 / 1024} MiB
  --speedup X            replay X times faster than recorded (default ${DEFAULT_SPEEDUP})
  --start S              window start, s of trace time (default 0)
  --duration S           window length, s of trace time (default ${DEFAULT_DURATION_S})
  --engines N            sim-engines behind the gateway (default ${DEFAULT_ENGINES})
  --engine-args=FLAGS    sim-engine flags for every engine, after the bench's own
                         (--profile ${DEFAULT_REPLAY_PROFILE}, and --max-model-len when the window
                         holds a request longer than its context); a flag given
                         here wins. Write it with '=': --engine-args='--profile h200-llama-3.1-8b'
  --gateway-config FILE  a gateway config (YAML) to replay through; its listeners
                         and endpoints are replaced by the bench's (default: defaults)
  --base-url URL         replay onto this OpenAI-compatible server instead
                         (http://host:port, a trailing /v1 is dropped); no gateway
                         and no sim-engine is started
  --api-key KEY          with --base-url: sent as 'Authorization: Bearer KEY'
                         (default: $${BENCH_API_KEY_ENV}, which keeps it out of ps)
  --model NAME           with --base-url: the model to name (default: the first
                         the server's /v1/models lists)
  --slo-ttft-ms MS       goodput SLO on time to first token (default ${DEFAULT_SLO_TTFT_MS})
  --slo-tpot-ms MS       goodput SLO on time per output token after the first (default ${DEFAULT_SLO_TPOT_MS})
  --metric-percentiles LIST
                         the percentiles reported, comma-separated (default ${DEFAULT_METRIC_PERCENTILES.join(",")}):
                         p99 → p99_ttft_ms, p99_tpot_ms, p99_itl_ms, p99_e2el_ms
  --drain-s S            after the last send, wait this long for open answers, then
                         abort them and count them unfinished (default ${DEFAULT_DRAIN_S})
  --twin                 replay in the fleet twin instead of onto processes: the
                         gateway's own scheduling and admission modules and the
                         sim-engine's core on a virtual clock, in this process (up to
                         ${MAX_TWIN_ENGINES} engines; deterministic, whatever the host's load)
${faultUsage(25)}
                         Without --twin (and in --check's real-time run): kill only,
                         a SIGKILL of the sim-engine, started again on its port FOR later
  --fleet NODESxGPUS[:TP]  with --twin: the engines are replicas (--engines of them,
                         TP GPUs each, default 1) that the fleet manager's planner
                         places on NODES nodes of GPUS GPUs, each starting up for
                         --startup-s before it serves; --fault then also takes
                         drain-node:NODE@AT[+FOR], and the report adds the fleet's
                         replicas, GPU-hours and the planner's actions
  --startup-s S          with --fleet: a replica's start-up, simulated s (default ${DEFAULT_STARTUP_S})
  --check                replay the window twice, real-time then in the fleet twin,
                         and print the figures side by side with the twin's error
                         (output tok/s and TTFT p50 / p90 held to ±10 %)
  --report FILE.html     also write a self-contained HTML report with charts over time
${STRICT_USAGE}
  --json                 one JSON object instead of the tables: flat keys in
                         vllm bench serve's names (docs/benchmarks.md)`;

/** --fleet NODESxGPUS[:TP] and --startup-s: a fleet of nodes in the twin, its replicas placed by the fleet manager's planner. */
function fleetFlags(args: Parameters<BenchScenario["run"]>[0], twin: boolean, replicas: number): FleetTarget["fleet"] {
  const raw = stringFlag(args, "fleet");
  if (raw === undefined) {
    if (args.values["startup-s"] !== undefined) throw new UsageError("--startup-s is a replica's start-up in a fleet of nodes: give --fleet too");
    return undefined;
  }
  if (!twin) throw new UsageError("--fleet places replicas in the fleet twin: give --twin too");
  const m = /^(\d{1,4})x(\d{1,3})(?::(\d{1,3}))?$/.exec(raw.trim());
  const [count, gpus, tp] = m ? [Number(m[1]), Number(m[2]), m[3] === undefined ? 1 : Number(m[3])] : [0, 0, 0];
  if (!m || count < 1 || gpus < 1 || tp < 1 || tp > gpus)
    throw new UsageError(`--fleet: expected NODESxGPUS[:TP] (e.g. 4x8 or 4x8:2; TP at most GPUS), got '${raw}'`);
  const nodes = { count, gpus, gpuClass: "h100" };
  const slots = TwinFleetManager.slotsFor(nodes, tp);
  if (slots > MAX_TWIN_ENGINES) throw new UsageError(`--fleet ${raw}: ${slots} replica slots, more than the twin's ${MAX_TWIN_ENGINES} engines`);
  if (replicas > slots) throw new UsageError(`--engines ${replicas}: the fleet ${raw} has room for ${slots} replicas of ${tp} GPU(s)`);
  return { nodes, tensorParallel: tp, startupMs: numberFlag(args, "startup-s", DEFAULT_STARTUP_S, { min: 0, max: 3_600 }) * 1000 };
}

/** Flags that start or shape the fleet, and so mean nothing with --base-url. */
const FLEET_FLAGS = ["engines", "engine-args", "gateway-config"] as const;

function targetFromFlags(args: Parameters<BenchScenario["run"]>[0]): ReplayTarget {
  const baseUrl = stringFlag(args, "base-url");
  const apiKeyFlag = stringFlag(args, "api-key");
  const model = stringFlag(args, "model");
  if (baseUrl === undefined) {
    if (apiKeyFlag !== undefined) throw new UsageError("--api-key goes with --base-url (the bench's own fleet wants no key)");
    if (model !== undefined) throw new UsageError("--model goes with --base-url (the bench's own fleet serves one model)");
    const gatewayConfigPath = stringFlag(args, "gateway-config");
    const twin = boolFlag(args, "twin");
    const engines = numberFlag(args, "engines", DEFAULT_ENGINES, { min: 1, max: twin ? MAX_TWIN_ENGINES : 64, integer: true });
    const fleet = fleetFlags(args, twin, engines);
    const faults = faultsFlag(
      args,
      fleet ? TwinFleetManager.slotsFor(fleet.nodes, fleet.tensorParallel) : engines,
      twin,
      fleet?.nodes.count ?? 0,
      realTimeFaults,
    );
    return {
      kind: twin ? "twin" : "llmgw",
      engines,
      ...(faults.length > 0 ? { faults } : {}),
      ...(fleet ? { fleet } : {}),
      engineArgs: splitArgs(stringFlag(args, "engine-args") ?? ""),
      ...(gatewayConfigPath === undefined ? {} : { gatewayConfigPath: resolve(gatewayConfigPath) }),
    };
  }
  if (boolFlag(args, "twin")) throw new UsageError("--twin runs the bench's own fleet in the fleet twin; with --base-url nothing is simulated");
  if (args.values.fault !== undefined) throw new UsageError("--fault schedules faults in the fleet twin; with --base-url nothing is simulated");
  if (args.values.fleet !== undefined) throw new UsageError("--fleet places replicas in the fleet twin; with --base-url nothing is simulated");
  const fleetFlag = FLEET_FLAGS.find((f) => args.values[f] !== undefined);
  if (fleetFlag !== undefined) throw new UsageError(`--${fleetFlag} shapes the fleet the bench starts; with --base-url it starts none`);
  const apiKey = apiKeyFlag ?? (process.env[BENCH_API_KEY_ENV] || undefined);
  if (model === "") throw new UsageError("--model: expected a model name");
  return { kind: "base-url", root: serverRoot(baseUrl), ...(apiKey === undefined ? {} : { apiKey }), ...(model === undefined ? {} : { model }) };
}

/**
 * --check: the window replayed by the real-time stack, then in the fleet
 * twin (the same engines' flags, gateway config and schedule), the figures
 * side by side with the twin's error.
 */
async function runCheck(o: ReplayOptions, args: Parameters<BenchScenario["run"]>[0]): Promise<number> {
  if (o.target.kind !== "llmgw")
    throw new UsageError("--check replays onto the bench's own fleet, real-time then in the twin: leave --twin and --base-url out");
  if (args.values.report !== undefined) throw new UsageError("--check prints the two runs side by side: leave --report out");
  // The check holds TTFT p90: it is reported whatever --metric-percentiles says.
  const percentiles = o.percentiles.includes(90) ? o.percentiles : [...o.percentiles, 90];
  const real = await runReplay({ ...o, percentiles });
  const twin = await runReplay({ ...o, percentiles, target: { ...o.target, kind: "twin" } });
  const check = replayTwinCheck(real, twin);
  if (boolFlag(args, "json")) console.log(JSON.stringify({ scenario: "replay-twin-check", real, twin, check }));
  else console.log(`${formatReplayText(real)}\n\n${formatReplayTwinCheck(check)}`);
  return strictVerdict(args, [real.engine_clock]);
}

export const replayScenario: BenchScenario = {
  name: "replay",
  summary:
    "a production trace (Azure 2023, Mooncake) replayed open-loop onto sim-engines behind llmgw or any OpenAI-compatible server: TTFT/TPOT/ITL/E2EL, goodput, per-endpoint load",
  usage: USAGE,
  options: {
    trace: { type: "string" },
    speedup: { type: "string" },
    start: { type: "string" },
    duration: { type: "string" },
    engines: { type: "string" },
    "engine-args": { type: "string" },
    "gateway-config": { type: "string" },
    "base-url": { type: "string" },
    "api-key": { type: "string" },
    model: { type: "string" },
    "slo-ttft-ms": { type: "string" },
    "slo-tpot-ms": { type: "string" },
    "metric-percentiles": { type: "string" },
    "drain-s": { type: "string" },
    report: { type: "string" },
    twin: { type: "boolean" },
    check: { type: "boolean" },
    fault: { type: "string", multiple: true },
    fleet: { type: "string" },
    "startup-s": { type: "string" },
    strict: { type: "boolean" },
  },
  async run(args) {
    const traceArg = stringFlag(args, "trace");
    if (traceArg === undefined) throw new UsageError(`--trace is required (${NAMES}, or a file)`);
    const path = tracePath(traceArg);
    if (path === undefined) throw new UsageError(`--trace: '${traceArg}' is neither a shipped trace (${NAMES}) nor a file`);
    const report = stringFlag(args, "report");
    const o: Omit<ReplayOptions, "trace"> = {
      speedup: numberFlag(args, "speedup", DEFAULT_SPEEDUP, { min: 0.01, max: 10_000 }),
      startS: numberFlag(args, "start", 0, { min: 0 }),
      durationS: numberFlag(args, "duration", DEFAULT_DURATION_S, { min: 0.001 }),
      target: targetFromFlags(args),
      slo: {
        ttftMs: numberFlag(args, "slo-ttft-ms", DEFAULT_SLO_TTFT_MS, { min: 0 }),
        tpotMs: numberFlag(args, "slo-tpot-ms", DEFAULT_SLO_TPOT_MS, { min: 0 }),
      },
      percentiles: percentilesFlag(stringFlag(args, "metric-percentiles")),
      drainS: numberFlag(args, "drain-s", DEFAULT_DRAIN_S, { min: 0, max: 86_400 }),
      progress: progressPrinter(),
    };
    let trace: Trace;
    try {
      trace = loadTrace(traceArg, path);
    } catch (err) {
      if (err instanceof UsageError) throw err;
      throw new UsageError(`--trace: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (boolFlag(args, "check")) return await runCheck({ ...o, trace }, args);
    const r = await runReplay({ ...o, trace });
    if (report !== undefined) writeFileSync(report, renderReplayHtml(r));
    if (boolFlag(args, "json")) console.log(JSON.stringify(r));
    else {
      console.log(formatReplayText(r));
      if (report !== undefined) console.log(`\nreport: ${resolve(report)}`);
    }
    return strictVerdict(args, [r.engine_clock]);
  },
};
