/**
 * `llmgw bench routing`: llm-d's "37-capacity" routing experiment
 * (src/bench/routing/published-37-capacity.ts) reproduced on sim-engines,
 * scaled to this machine (src/bench/routing/scaling.ts), every routing
 * policy in one run (src/bench/routing/policies.ts): for each, fresh
 * engines with cold caches, a gateway with that policy, and the same
 * open-loop schedule of the shared_prefix workload; then the figures the
 * published report gives, the published rows beside them, and each policy
 * against random.
 */
import { resolve } from "node:path";
import { DEFAULT_BANDS, DEFAULT_FIRST_TOKEN_TIMEOUT_MS, DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_TOTAL_TIMEOUT_MS } from "../config/defaults.ts";
import { parsePrometheusText } from "../engines/prom-text.ts";
import { boolFlag, numberFlag, stringFlag, UsageError } from "../shared/flags.ts";
import { REPO_ROOT } from "../shared/llmgw-child.ts";
import { resolveProfile } from "../sim/profiles/catalog.ts";
import type { TwinFault } from "../twin/faults.ts";
import { DEFAULT_KV_EVENT_DELAY_MS, TwinFleet } from "../twin/twin-fleet.ts";
import { type EngineClockReport, engineClockReport, STRICT_USAGE, sampleEngineClocks, strictVerdict } from "./engine-clock-report.ts";
import { gitCommit } from "./git-commit.ts";
import { progressPrinter } from "./progress-line.ts";
import { type OpenLoopResult, startOpenLoop } from "./replay/open-loop-driver.ts";
import { runTwinOpenLoop } from "./replay/twin-open-loop.ts";
import { quantile } from "./report.ts";
import { formatCodegenText, runCodegen } from "./routing/codegen-experiment.ts";
import { optimizedBaselineComparison } from "./routing/optimized-baseline-report.ts";
import { endpointExtras, POLICY_DIR, type RoutingPolicy, routingPolicies, selectPolicies, templateListeners } from "./routing/policies.ts";
import { PUBLISHED_SOURCE, PUBLISHED_SUMMARY } from "./routing/published-37-capacity.ts";
import { CODEGEN_DEFAULT_POLICIES, CODEGEN_SETUP } from "./routing/published-codegen.ts";
import { OPTIMIZED_BASELINE_SETUP as OB, OPTIMIZED_BASELINE_ARMS } from "./routing/published-optimized-baseline.ts";
import {
  formatRoutingText,
  fullSizeVerdict,
  type PolicyReport,
  type RoutingExperiment,
  type RoutingReport,
  type RoutingRun,
  ratios,
  targetVerdict,
} from "./routing/routing-report.ts";
import { policyFigures } from "./routing/routing-summary.ts";
import * as S from "./routing/scaling.ts";
import { buildSchedule, type Stage, type WorkloadSchedule } from "./routing/shared-prefix-workload.ts";
import { formatTwinCheck, twinCheck } from "./routing/twin-check.ts";
import type { BenchScenario } from "./scenario.ts";
import { engineCounters, type SimEngine, splitArgs, startBenchGateway, startSimEngines } from "./sim-fleet.ts";
import { faultsFlag, faultUsage, twinFailures } from "./twin-faults.ts";

/** KV-cache events the gateway received from the engines during a policy's run (0: the engines published none, or nothing listened). */
async function kvEventsReceived(admin: string): Promise<number> {
  try {
    const parsed = parsePrometheusText(await (await fetch(`${admin}/metrics`)).text());
    return parsed.samples.filter((s) => s.name === "llmgw_kv_events_total").reduce((a, s) => a + s.value, 0);
  } catch {
    return NaN;
  }
}

const MODEL = "routing-model";
export const DEFAULT_SEED = 37;
export const DEFAULT_TIME_SCALE = 1;
/** Simulated seconds an answer may still take after the last send before it is cut and counted failed. */
export const DEFAULT_DRAIN_S = 60;
/** A stage's length when --rates is given without --stage-s, simulated s. */
export const DEFAULT_CUSTOM_STAGE_S = 3;
const BLOCK_TOKENS = 16;
/** Engines a twin run may have (the real-time run is held to what one host can start). */
const MAX_TWIN_ENGINES = 1024;
/** How long an engine has to announce a listener a policy's endpoint template names. */
const LISTENER_WAIT_MS = 10_000;

/**
 * What every policy's gateway gets under its own keys. Engines are polled
 * every 50 ms (llm-d's endpoint picker refreshes its metrics as often) so
 * that the load scorers see the engines' queues within a small part of a
 * request's life: the scaled requests live ~1 s, not ~25.
 */
export const BASE_GATEWAY_CONFIG: Readonly<Record<string, unknown>> = Object.freeze({ health: { poll_interval_ms: 50 } });

/** The longest a band may keep a request queued (admission.bands[].ttl_ms). */
const MAX_BAND_TTL_MS = 3_600_000;

/**
 * At full size requests live S.FULL_SIZE.timeFactor times longer, and so
 * may their wait in the gateway's admission queue and their attempts'
 * deadlines: each band keeps the default's bands' time-to-live that many
 * times over (up to the most a band may), and the first token, the
 * silence between tokens and the whole request may take that many times
 * the default deadlines, as the scaled run's requests get the defaults
 * against lives that many times shorter.
 */
export const FULL_SIZE_GATEWAY_CONFIG: Readonly<Record<string, unknown>> = Object.freeze(
  mergeConfig(BASE_GATEWAY_CONFIG, {
    admission: { bands: DEFAULT_BANDS.map((b) => ({ ...b, ttl_ms: Math.min(MAX_BAND_TTL_MS, b.ttl_ms * S.FULL_SIZE.timeFactor) })) },
    deadlines: {
      first_token_ms: DEFAULT_FIRST_TOKEN_TIMEOUT_MS * S.FULL_SIZE.timeFactor,
      idle_ms: DEFAULT_IDLE_TIMEOUT_MS * S.FULL_SIZE.timeFactor,
      total_ms: DEFAULT_TOTAL_TIMEOUT_MS * S.FULL_SIZE.timeFactor,
    },
  }),
);

export interface RoutingOptions {
  pods: number;
  profile: string;
  kvTokens: number;
  groups: number;
  perGroup: number;
  systemLen: number;
  questionLen: number;
  outputLen: number;
  warmup: Stage | undefined;
  stages: Stage[];
  timeScale: number;
  seed: number;
  drainS: number;
  /** Extra sim-engine flags for every engine (after the bench's, before a policy's). */
  engineArgs: string[];
  policies: RoutingPolicy[];
  /** Run each policy in the fleet twin (virtual clock, one process) instead of on real processes. */
  twin: boolean;
  /** --full-size: the published shape at its published scale (the gateway's queue keeps requests as much longer as they live). */
  fullSize?: boolean;
  /** Whose published figures the run is compared with (default 37-capacity). */
  experiment?: RoutingExperiment;
  /** The twin's delay from an engine's step to the gateway's KV-block index holding its events, simulated ms. */
  kvEventDelayMs?: number;
  /** Faults scheduled in each policy's twin run. */
  faults?: readonly TwinFault[];
  progress?: (line: string, final: boolean) => void;
}

/** `over` merged into `base`, mapping by mapping (a policy's health keys join the base's instead of replacing them). */
export function mergeConfig(base: Readonly<Record<string, unknown>>, over: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    const mapping = (x: unknown): x is Record<string, unknown> => x !== null && typeof x === "object" && !Array.isArray(x);
    out[k] = mapping(b) && mapping(v) ? mergeConfig(b, v) : v;
  }
  return out;
}

/** What every policy's gateway gets before its own keys. */
function baseConfig(o: Pick<RoutingOptions, "fullSize">): Readonly<Record<string, unknown>> {
  return o.fullSize ? FULL_SIZE_GATEWAY_CONFIG : BASE_GATEWAY_CONFIG;
}

export function engineFlags(o: Pick<RoutingOptions, "profile" | "kvTokens" | "timeScale" | "engineArgs">): string[] {
  return ["--profile", o.profile, "--num-gpu-blocks", String(Math.floor(o.kvTokens / BLOCK_TOKENS)), "--time-scale", String(o.timeScale), ...o.engineArgs];
}

async function waitForListeners(e: SimEngine, names: readonly string[]): Promise<void> {
  const deadline = Date.now() + LISTENER_WAIT_MS;
  while (names.some((n) => e.child.urls[n] === undefined)) {
    if (Date.now() > deadline) {
      const missing = names.filter((n) => e.child.urls[n] === undefined).map((n) => `{engine.${n}}`);
      throw new UsageError(
        `the endpoint template names ${missing.join(", ")}, which engine ${e.id} did not announce within ${LISTENER_WAIT_MS} ms (it announced: ${Object.keys(e.child.urls).join(", ")})`,
      );
    }
    await Bun.sleep(20);
  }
}

/** Ctrl-C: the policy running stops sending (its report still accounts for every request) and no other starts. */
interface Interrupt {
  stopped: boolean;
  /** Stops the load running now, if any. */
  stopLoad?: () => void;
}

async function runPolicy(
  o: RoutingOptions,
  policy: RoutingPolicy,
  schedule: WorkloadSchedule,
  interrupt: Interrupt,
  onProgress: (line: string) => void,
): Promise<PolicyReport> {
  const t0 = performance.now();
  const engines = await startSimEngines(o.pods, MODEL, [...engineFlags(o), ...splitArgs(policy.engineArgs)]);
  try {
    const listeners = templateListeners(policy.endpoint);
    await Promise.all(engines.map((e) => waitForListeners(e, listeners))).catch((err: unknown) => {
      throw err instanceof UsageError ? new UsageError(`policy ${policy.name} (${policy.source}): ${err.message}`) : err;
    });
    const gateway = await startBenchGateway(engines, MODEL, mergeConfig(baseConfig(o), policy.gateway), (e) =>
      endpointExtras(policy.endpoint, e.child.urls),
    ).catch((err: unknown) => {
      throw err instanceof UsageError ? new UsageError(`policy ${policy.name} (${policy.source}): ${err.message}`) : err;
    });
    let result: OpenLoopResult;
    let kvEvents = NaN;
    let clock: EngineClockReport;
    const clockBefore = await sampleEngineClocks(engines.map((e) => e.url));
    try {
      const requests = schedule.requests.map((r) => ({ atMs: r.atMs / o.timeScale, segments: r.segments, maxTokens: r.maxTokens }));
      const lastS = schedule.endMs / 1000;
      const load = startOpenLoop({ url: `${gateway.api}/v1/completions`, model: MODEL, requests, drainMs: (o.drainS * 1000) / o.timeScale }, (p) =>
        onProgress(
          `routing: ${policy.name}: ${((p.elapsedMs * o.timeScale) / 1000).toFixed(0)} of ${lastS.toFixed(0)} s  sent ${p.sent}/${requests.length}  done ${p.done}  in flight ${p.inFlight}  errors ${p.errors}`,
        ),
      );
      interrupt.stopLoad = () => load.stop();
      result = await load.done.finally(() => (interrupt.stopLoad = undefined));
      clock = engineClockReport(clockBefore, await sampleEngineClocks(engines.map((e) => e.url)));
      kvEvents = await kvEventsReceived(gateway.admin);
    } finally {
      await gateway.child.stop();
    }
    const counters = await Promise.all(engines.map((e) => engineCounters(e.url)));
    let hits = 0;
    let queries = 0;
    let preemptions = 0;
    for (const c of counters) {
      hits += c.prefixCacheHits ?? 0;
      queries += c.prefixCacheQueries ?? 0;
      preemptions += c.preemptions ?? 0;
    }
    const late = result.records.filter((r) => !r.error?.startsWith("unsent")).map((r) => r.lateMs);
    return {
      name: policy.name,
      description: policy.description,
      source: policy.source.startsWith("derived") ? policy.source : policy.source.replace(`${REPO_ROOT}/`, ""),
      ...(policy.published ? { published: policy.published } : {}),
      figures: policyFigures(result.records, (id) => schedule.requests[id]!, o.stages, o.timeScale),
      prefix_cache_hit_rate: queries > 0 ? Math.round((hits / queries) * 10_000) / 10_000 : NaN,
      preemptions,
      kv_events_received: kvEvents,
      send_lateness_ms: { p50: Math.round(quantile(late, 0.5) * 100) / 100, p99: Math.round(quantile(late, 0.99) * 100) / 100 },
      engine_clock: clock,
      wall_s: Math.round((performance.now() - t0) / 100) / 10,
    };
  } finally {
    await Promise.all(engines.map((e) => e.child.stop()));
  }
}

/**
 * One policy in the fleet twin: the same engine flags, gateway config and
 * schedule as runPolicy, on a virtual clock in this process. Times are
 * simulated throughout (the schedule is not divided by the time scale).
 */
async function runPolicyTwin(
  o: RoutingOptions,
  policy: RoutingPolicy,
  schedule: WorkloadSchedule,
  interrupt: Interrupt,
  onProgress: (line: string) => void,
): Promise<PolicyReport> {
  const t0 = performance.now();
  const fleet = new TwinFleet({
    engines: o.pods,
    model: MODEL,
    engineFlags: [...engineFlags(o), ...splitArgs(policy.engineArgs)],
    gateway: mergeConfig(baseConfig(o), policy.gateway),
    kvEvents: policy.endpoint.kv_events !== undefined,
    seed: o.seed,
    ...(o.kvEventDelayMs !== undefined ? { kvEventDelayMs: o.kvEventDelayMs } : {}),
  });
  const lastS = schedule.endMs / 1000;
  const result = await runTwinOpenLoop(fleet, {
    requests: schedule.requests,
    drainMs: o.drainS * 1000,
    ...(o.faults !== undefined && o.faults.length > 0 ? { faults: o.faults } : {}),
    stopped: () => interrupt.stopped,
    onProgress: (p) =>
      onProgress(
        `routing (twin): ${policy.name}: ${(p.elapsedMs / 1000).toFixed(0)} of ${lastS.toFixed(0)} s  sent ${p.sent}/${schedule.requests.length}  done ${p.done}  in flight ${p.inFlight}  errors ${p.errors}`,
      ),
  });
  const { hitRate, preemptions } = fleet.cacheFigures();
  return {
    name: policy.name,
    description: policy.description,
    source: policy.source.startsWith("derived") ? policy.source : policy.source.replace(`${REPO_ROOT}/`, ""),
    ...(policy.published ? { published: policy.published } : {}),
    figures: policyFigures(result.records, (id) => schedule.requests[id]!, o.stages, 1),
    prefix_cache_hit_rate: Math.round(hitRate * 10_000) / 10_000,
    preemptions,
    kv_events_received: fleet.gateway.kvEventsApplied,
    send_lateness_ms: { p50: 0, p99: 0 },
    ...(o.faults !== undefined && o.faults.length > 0 ? { failures: twinFailures(result) } : {}),
    wall_s: Math.round((performance.now() - t0) / 100) / 10,
  };
}

export async function runRouting(o: RoutingOptions): Promise<RoutingReport> {
  const schedule = buildSchedule({
    groups: o.groups,
    perGroup: o.perGroup,
    systemLen: o.systemLen,
    questionLen: o.questionLen,
    outputLen: o.outputLen,
    ...(o.warmup ? { warmup: o.warmup } : {}),
    stages: o.stages,
    seed: o.seed,
  });
  if (schedule.requests.length === 0) throw new UsageError("the stages send no request (rates × lengths too small)");
  const policies: PolicyReport[] = [];
  const interrupt: Interrupt = { stopped: false };
  const onSigint = () => {
    interrupt.stopped = true;
    interrupt.stopLoad?.();
  };
  process.on("SIGINT", onSigint);
  try {
    for (const policy of o.policies) {
      if (interrupt.stopped) break;
      const progress = (line: string) => o.progress?.(line, false);
      policies.push(await (o.twin ? runPolicyTwin : runPolicy)(o, policy, schedule, interrupt, progress));
      const f = policies[policies.length - 1]!.figures;
      o.progress?.(`routing: ${policy.name}: output ${f.output_tok_s} tok/s, TTFT p90 ${f.ttft_s.p90} s, ${f.answered}/${f.requests} answered`, true);
    }
  } finally {
    process.off("SIGINT", onSigint);
  }
  const commit = gitCommit();
  const run: RoutingRun = {
    pods: o.pods,
    profile: o.profile,
    kv_tokens: Math.floor(o.kvTokens / BLOCK_TOKENS) * BLOCK_TOKENS,
    groups: o.groups,
    per_group: o.perGroup,
    system_len: o.systemLen,
    question_len: o.questionLen,
    output_len: o.outputLen,
    warmup: o.warmup ?? null,
    stages: o.stages,
    time_scale: o.timeScale,
    seed: o.seed,
    requests: schedule.requests.length,
    engine_args: engineFlags(o),
    clock: o.twin ? "twin" : "real-time",
    full_size: o.fullSize === true,
    experiment: o.experiment ?? "37-capacity",
    date: new Date().toISOString(),
    ...(commit === undefined ? {} : { commit }),
  };
  const vsRandom = ratios(policies);
  return {
    scenario: "routing",
    run,
    shape: {
      run: S.cacheShape({
        pods: o.pods,
        kvTokens: run.kv_tokens,
        groups: o.groups,
        systemLen: o.systemLen,
        questionLen: o.questionLen,
        outputLen: o.outputLen,
      }),
      published: S.PUBLISHED_SHAPE,
    },
    policies,
    vs_random: vsRandom,
    // At full size the published figures are held directly; the scaled target is set on the scaled 37-capacity run.
    target: o.fullSize || run.experiment !== "37-capacity" ? null : targetVerdict(vsRandom),
    full_size: o.fullSize && run.experiment === "37-capacity" ? fullSizeVerdict(policies, vsRandom, true) : null,
    optimized_baseline:
      run.experiment === "optimized-baseline"
        ? optimizedBaselineComparison(
            policies,
            o.stages.map((s) => s.rate),
            true,
          )
        : null,
    published: { source: PUBLISHED_SOURCE, summary: PUBLISHED_SUMMARY },
  };
}

/** The flags of the open-loop experiments that the code-generation run, closed-loop at a concurrency, has no use for. */
function notCodegenFlags(): string[] {
  return [...SHAPE_FLAGS.filter((f) => f !== "pods" && f !== "engine-args"), "drain-s", "full-size", "check", "time-scale", "strict"];
}

/** `--experiment codegen`: the conversation replay at each concurrency, twin only (its prompts average ~60,000 tokens). */
async function runCodegenCommand(args: Parameters<BenchScenario["run"]>[0]): Promise<number> {
  if (!boolFlag(args, "twin")) throw new UsageError("--experiment codegen runs in the fleet twin only (10 pods, prompts of ~60,000 tokens): add --twin");
  for (const f of notCodegenFlags()) if (args.values[f] !== undefined) throw new UsageError(`--${f} does not apply to --experiment codegen`);
  const wanted = (stringFlag(args, "policies") ?? "")
    .split(",")
    .map((x) => x.trim())
    .filter((x) => x !== "");
  const interrupt = { stopped: false };
  const onSigint = () => {
    interrupt.stopped = true;
  };
  process.on("SIGINT", onSigint);
  const printer = progressPrinter();
  try {
    const r = await runCodegen({
      policies: selectPolicies(
        routingPolicies(resolve(stringFlag(args, "policy-dir") ?? POLICY_DIR)),
        wanted.length === 0 ? [...CODEGEN_DEFAULT_POLICIES] : wanted,
      ),
      concurrency: concurrencyList(args),
      pods: numberFlag(args, "pods", CODEGEN_SETUP.pods, { min: 1, max: MAX_TWIN_ENGINES, integer: true }),
      seed: numberFlag(args, "seed", DEFAULT_SEED, { min: 0, max: 2 ** 32 - 1, integer: true }),
      gateway: (policy) => mergeConfig(FULL_SIZE_GATEWAY_CONFIG, policy.gateway),
      kvEventDelayMs: numberFlag(args, "kv-events-delay-ms", DEFAULT_KV_EVENT_DELAY_MS, { min: 0, max: 60_000 }),
      engineArgs: splitArgs(stringFlag(args, "engine-args") ?? ""),
      faults: faultsFlag(args, numberFlag(args, "pods", CODEGEN_SETUP.pods, { min: 1, max: MAX_TWIN_ENGINES, integer: true }), true),
      stopped: () => interrupt.stopped,
      progress: printer,
    });
    if (boolFlag(args, "json")) console.log(JSON.stringify(r));
    else console.log(formatCodegenText(r));
    const v = r.verdict;
    return v.baseline?.met === false || v.gains.some((g) => !g.met) ? 1 : 0;
  } finally {
    process.off("SIGINT", onSigint);
  }
}

/** The flags that change the experiment's shape (the others change how it runs: seed, policies, clock, drain). */
export const SHAPE_FLAGS = [
  "pods",
  "profile",
  "kv-tokens",
  "groups",
  "per-group",
  "system-len",
  "question-len",
  "output-len",
  "rates",
  "stage-s",
  "warmup-rate",
  "warmup-s",
  "engine-args",
] as const;

const EXPERIMENTS: readonly RoutingExperiment[] = ["37-capacity", "optimized-baseline", "codegen"];

function experimentFlag(args: Parameters<typeof stringFlag>[0]): RoutingExperiment {
  const raw = stringFlag(args, "experiment") ?? "37-capacity";
  const found = EXPERIMENTS.find((e) => e === raw);
  if (!found) throw new UsageError(`--experiment: expected one of ${EXPERIMENTS.join(", ")}, got '${raw}'`);
  return found;
}

/** The KV cache a profile's derivation gives each pod, tokens (where the published run does not say). */
function derivedKvTokens(profile: string): number {
  try {
    const p = resolveProfile({ profile }).profile;
    return p.numGpuBlocks * p.blockSize;
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}

/**
 * Each shape flag's fallback: the scaled 37-capacity default, its published
 * values at full size, or the optimized baseline's (full size only, KV from
 * the profile since the run does not publish it).
 */
function shapeFallbacks(experiment: RoutingExperiment, fullSize: boolean, profile: string) {
  const fullDrainS = DEFAULT_DRAIN_S * S.FULL_SIZE.timeFactor;
  if (experiment === "optimized-baseline") {
    const { pods, groups, perGroup, systemLen, questionLen, outputLen, warmup, stages } = OB;
    return { pods, groups, perGroup, systemLen, questionLen, outputLen, warmup, stages, kvTokens: derivedKvTokens(profile), drainS: fullDrainS };
  }
  const common = { pods: S.DEFAULT_PODS, groups: S.DEFAULT_GROUPS, perGroup: S.DEFAULT_PER_GROUP };
  if (fullSize) return { ...common, ...S.FULL_SIZE, drainS: fullDrainS };
  return {
    ...common,
    systemLen: S.DEFAULT_SYSTEM_LEN,
    questionLen: S.DEFAULT_QUESTION_LEN,
    outputLen: S.DEFAULT_OUTPUT_LEN,
    kvTokens: S.DEFAULT_KV_TOKENS,
    warmup: S.DEFAULT_WARMUP,
    stages: S.DEFAULT_STAGES,
    drainS: DEFAULT_DRAIN_S,
  };
}

/** A comma-separated list of positive numbers. */
export function numberList(args: Parameters<typeof stringFlag>[0], name: string, fallback: readonly number[]): number[] {
  const raw = stringFlag(args, name);
  if (raw === undefined) return [...fallback];
  const values = raw.split(",").map((x) => Number(x.trim()));
  if (values.length === 0 || values.some((v) => !Number.isFinite(v) || v <= 0))
    throw new UsageError(`--${name}: expected positive numbers separated by commas, got '${raw}'`);
  return values;
}

/** --concurrency: whole numbers of conversations, 1 to 10,000 each. */
function concurrencyList(args: Parameters<typeof stringFlag>[0]): number[] {
  const values = numberList(args, "concurrency", CODEGEN_SETUP.concurrency);
  if (values.some((v) => !Number.isInteger(v) || v > 10_000))
    throw new UsageError(`--concurrency: expected whole numbers from 1 to 10000, got '${stringFlag(args, "concurrency")}'`);
  return values;
}

/** Stages from --rates and --stage-s: one length for every stage, or one per rate. */
export function stagesFrom(rates: readonly number[], lengths: readonly number[]): Stage[] {
  if (lengths.length !== 1 && lengths.length !== rates.length)
    throw new UsageError(`--stage-s: expected one length, or one per rate (${rates.length}), got ${lengths.length}`);
  return rates.map((rate, i) => ({ rate, durationS: lengths.length === 1 ? lengths[0]! : lengths[i]! }));
}

const list = (xs: readonly number[]) => xs.map((x) => String(Math.round(x * 1000) / 1000)).join(",");

const USAGE = `usage: llmgw bench routing [--workload shared-prefix|lora] [--pods N] [--profile NAME] [--kv-tokens N] [--groups N] [--per-group N]
                          [--system-len N] [--question-len N] [--output-len N] [--rates LIST] [--stage-s LIST]
                          [--warmup-rate R] [--warmup-s S] [--time-scale X] [--policies LIST] [--policy-dir DIR] [--seed N]
                          [--drain-s S] [--engine-args=FLAGS] [--full-size] [--experiment NAME] [--concurrency LIST] [--twin | --check] [--kv-events-delay-ms MS] [--fault SPEC]…
                          [--strict] [--json]

llm-d's "37-capacity" routing experiment on sim-engines, scaled to this
machine: ${S.DEFAULT_PODS} pods, a working set of prefixes that fits the cluster's KV
cache only if each prefix stays on one pod, Poisson stages after a warm-up.
Token counts are ${S.TOKEN_DIVISOR} times smaller than published and rates ${S.TOKEN_DIVISOR} times
higher (the same work a second, the same cache ratios); stages are ${S.STAGE_DIVISOR}
times shorter. Every routing policy (bench/routing-policies/, and one per
scorer or picker no file uses) runs on fresh engines with the same schedule;
then per policy output tok/s, req/s, success, TTFT p50/p90/mean, ITL mean
and the engines' prefix-cache hit rate, the published rows beside them, and
each policy against random. Rates and lengths are in simulated time.
Ctrl-C stops the run and reports the policies run so far. Exits 1 when llmgw's default misses its target against random on the
37-capacity shape (none of --pods … --warmup-s, --engine-args given); at
--full-size, when it falls short of the published best scheduler's gain.

flags:
  --workload W         shared-prefix (default: this experiment) or lora: many LoRA
                       adapters under Zipf popularity, llmgw vs load only vs random
                       (the same as 'llmgw bench lora'; its flags then apply)
  --pods N             sim-engines, one a pod (default ${S.DEFAULT_PODS})
  --profile NAME       sim-engine profile of each pod (default ${S.DEFAULT_PROFILE})
  --kv-tokens N        KV cache of each pod, tokens, in 16-token blocks (default ${S.DEFAULT_KV_TOKENS})
  --groups N           shared system prompts (default ${S.DEFAULT_GROUPS})
  --per-group N        questions per system prompt (default ${S.DEFAULT_PER_GROUP})
  --system-len N       tokens of a system prompt (default ${S.DEFAULT_SYSTEM_LEN})
  --question-len N     tokens of a question (default ${S.DEFAULT_QUESTION_LEN})
  --output-len N       tokens of every answer (max_tokens with ignore_eos; default ${S.DEFAULT_OUTPUT_LEN})
  --rates LIST         each stage's Poisson rate, requests/s (default ${list(S.DEFAULT_STAGES.map((s) => s.rate))})
  --stage-s LIST       each stage's length, s: one for all, or one per rate
                       (default ${list(S.DEFAULT_STAGES.map((s) => s.durationS))}; ${DEFAULT_CUSTOM_STAGE_S} each with --rates)
  --warmup-rate R      the warm-up's rate, requests/s (default ${S.DEFAULT_WARMUP.rate})
  --warmup-s S         the warm-up's length, s; 0 for none (default ${S.DEFAULT_WARMUP.durationS})
  --time-scale X       run the engines' clock X times faster (the sim-engine's
                       --time-scale) and the schedule with it; figures stay in
                       simulated time (default ${DEFAULT_TIME_SCALE})
  --policies LIST      the policies to run, in this order (default: all)
  --policy-dir DIR     where the policy files are (default bench/routing-policies)
  --seed N             the schedule's seed: arrivals and the prompts' order (default ${DEFAULT_SEED})
  --drain-s S          after the last send, answers still open this much later
                       are cut and count as failed (default ${DEFAULT_DRAIN_S})
  --engine-args=FLAGS  more sim-engine flags for every engine; write it with '='
  --full-size          the experiment at its published size: ${S.FULL_SIZE.systemLen} + ${S.FULL_SIZE.questionLen} tokens in,
                       ${S.FULL_SIZE.outputLen} out, ${S.FULL_SIZE.kvTokens} KV tokens a pod, the published rates and
                       stages (${list(S.FULL_SIZE.stages.map((s) => s.rate))} requests/s over ${list(S.FULL_SIZE.stages.map((s) => s.durationS))} s),
                       the drain and the gateway's queue time-to-live ×${S.FULL_SIZE.timeFactor}; the
                       flags above given beside it still apply. Each policy's
                       figures are held to its published row. About 20 s a policy
                       with --twin; ~20 minutes a policy in real time
  --experiment NAME    whose published run to reproduce: 37-capacity (default) or
                       optimized-baseline: llm-d's guide, ${OB.pods} × ${OB.profile}, ${OB.groups} groups
                       × ${OB.perGroup} prompts of ${OB.systemLen} + ${OB.questionLen} tokens, ${OB.outputLen} out, ${OB.stages.length} stages from
                       ${OB.stages[0]!.rate} to ${OB.stages.at(-1)!.rate} requests/s, at its published size only, KV from the
                       profile; round-robin and the default beside the published
                       arms; exits 1 when the default's gain over round-robin falls
                       short of llm-d's router's (the flags above still apply);
                       or codegen: llm-d's token-aware routing run on code
                       generation, ${CODEGEN_SETUP.pods} × ${CODEGEN_SETUP.profile}, closed-loop multi-turn
                       conversations (own system prompt ~50,000 tokens, ~6 turns),
                       one cold run per --concurrency; twin only; round-robin,
                       default and token-aware unless --policies says; takes
                       --pods, --policies, --policy-dir, --seed, --engine-args,
                       --kv-events-delay-ms, --fault and --json; exits 1 when round-robin
                       misses the published k8 row by more than 30 % or a policy's
                       gain falls short of the published one
  --concurrency LIST   --experiment codegen: the concurrencies, one cold run each
                       (default ${CODEGEN_SETUP.concurrency.join(",")})
  --twin               run every policy in the fleet twin: the gateway's own
                       scheduling and admission modules and the sim-engine's core
                       on a virtual clock, in this process (up to ${MAX_TWIN_ENGINES} pods);
                       deterministic, whatever the host's load
  --kv-events-delay-ms MS  in the twin, from an engine's step to the gateway's
                       KV-block index holding its events (default ${DEFAULT_KV_EVENT_DELAY_MS})
${faultUsage(23)}
  --check              run the schedule both ways, real-time then the twin, and
                       print each policy's figures side by side with the twin's
                       error and whether both rank the policies alike
${STRICT_USAGE}
  --json               one JSON object instead of the tables`;

export const routingScenario: BenchScenario = {
  name: "routing",
  summary:
    "llm-d's 37-capacity routing experiment, scaled: random, round-robin, load, llmgw's default and every other policy, with the published rows beside them",
  usage: USAGE,
  options: {
    pods: { type: "string" },
    profile: { type: "string" },
    "kv-tokens": { type: "string" },
    groups: { type: "string" },
    "per-group": { type: "string" },
    "system-len": { type: "string" },
    "question-len": { type: "string" },
    "output-len": { type: "string" },
    rates: { type: "string" },
    "stage-s": { type: "string" },
    "warmup-rate": { type: "string" },
    "warmup-s": { type: "string" },
    "time-scale": { type: "string" },
    policies: { type: "string" },
    "policy-dir": { type: "string" },
    seed: { type: "string" },
    "drain-s": { type: "string" },
    "engine-args": { type: "string" },
    twin: { type: "boolean" },
    check: { type: "boolean" },
    "full-size": { type: "boolean" },
    experiment: { type: "string" },
    concurrency: { type: "string" },
    "kv-events-delay-ms": { type: "string" },
    fault: { type: "string", multiple: true },
    strict: { type: "boolean" },
  },
  async run(args) {
    const experiment = experimentFlag(args);
    if (experiment === "codegen") return runCodegenCommand(args);
    const optimized = experiment === "optimized-baseline";
    // The optimized baseline has only its published size.
    const fullSize = optimized || boolFlag(args, "full-size");
    const profile = stringFlag(args, "profile") ?? (optimized ? OB.profile : S.DEFAULT_PROFILE);
    const shape = shapeFallbacks(experiment, fullSize, profile);
    const rates = numberList(
      args,
      "rates",
      shape.stages.map((s) => s.rate),
    );
    const lengths = numberList(args, "stage-s", stringFlag(args, "rates") === undefined ? shape.stages.map((s) => s.durationS) : [DEFAULT_CUSTOM_STAGE_S]);
    const warmupS = numberFlag(args, "warmup-s", shape.warmup.durationS, { min: 0, max: 86_400 });
    const twin = boolFlag(args, "twin");
    if (!twin && !boolFlag(args, "check") && args.values["kv-events-delay-ms"] !== undefined)
      throw new UsageError("--kv-events-delay-ms applies to the fleet twin: give --twin or --check too");
    const wanted = (stringFlag(args, "policies") ?? "")
      .split(",")
      .map((x) => x.trim())
      .filter((x) => x !== "");
    const o: RoutingOptions = {
      pods: numberFlag(args, "pods", shape.pods, { min: 1, max: twin ? MAX_TWIN_ENGINES : 64, integer: true }),
      profile,
      kvTokens: numberFlag(args, "kv-tokens", shape.kvTokens, { min: BLOCK_TOKENS, integer: true }),
      groups: numberFlag(args, "groups", shape.groups, { min: 1, max: 1_000_000, integer: true }),
      perGroup: numberFlag(args, "per-group", shape.perGroup, { min: 1, max: 1_000_000, integer: true }),
      systemLen: numberFlag(args, "system-len", shape.systemLen, { min: 0, max: 1_000_000, integer: true }),
      questionLen: numberFlag(args, "question-len", shape.questionLen, { min: 1, max: 1_000_000, integer: true }),
      outputLen: numberFlag(args, "output-len", shape.outputLen, { min: 1, max: 1_000_000, integer: true }),
      warmup: warmupS > 0 ? { rate: numberFlag(args, "warmup-rate", shape.warmup.rate, { min: 0.001 }), durationS: warmupS } : undefined,
      stages: stagesFrom(rates, lengths),
      timeScale: numberFlag(args, "time-scale", DEFAULT_TIME_SCALE, { min: 0.01, max: 1000 }),
      seed: numberFlag(args, "seed", DEFAULT_SEED, { min: 0, max: 2 ** 32 - 1, integer: true }),
      drainS: numberFlag(args, "drain-s", shape.drainS, { min: 0, max: 86_400 }),
      engineArgs: splitArgs(stringFlag(args, "engine-args") ?? ""),
      // The optimized baseline's two published arms, unless other policies are named.
      policies: selectPolicies(
        routingPolicies(resolve(stringFlag(args, "policy-dir") ?? POLICY_DIR)),
        wanted.length === 0 && optimized ? OPTIMIZED_BASELINE_ARMS.map((a) => a.policy) : wanted,
      ),
      twin,
      fullSize,
      experiment,
      kvEventDelayMs: numberFlag(args, "kv-events-delay-ms", DEFAULT_KV_EVENT_DELAY_MS, { min: 0, max: 60_000 }),
      progress: progressPrinter(),
    };
    o.faults = faultsFlag(args, o.pods, twin);
    if (boolFlag(args, "check")) {
      if (twin) throw new UsageError("--check runs the real-time stack and the twin: leave --twin out");
      const real = await runRouting(o);
      const inTwin = await runRouting({ ...o, twin: true });
      const check = twinCheck(real, inTwin);
      if (boolFlag(args, "json")) console.log(JSON.stringify({ scenario: "routing-twin-check", real, twin: inTwin, check }));
      else console.log(`${formatRoutingText(real)}\n\n${formatTwinCheck(check)}`);
      return strictVerdict(
        args,
        real.policies.map((p) => p.engine_clock),
      );
    }
    const r = await runRouting(o);
    // The targets are set on the 37-capacity shape: they hold the run to them only when no flag changed that shape.
    // Faults change the run as much as a shape flag does.
    const unchanged = SHAPE_FLAGS.every((f) => args.values[f] === undefined) && o.faults.length === 0;
    if (r.target) r.target.applies = unchanged;
    if (r.full_size) r.full_size.applies = unchanged;
    if (r.optimized_baseline) r.optimized_baseline.applies = unchanged;
    if (boolFlag(args, "json")) console.log(JSON.stringify(r));
    else console.log(formatRoutingText(r));
    if (
      strictVerdict(
        args,
        r.policies.map((p) => p.engine_clock),
      ) !== 0
    )
      return 1;
    if (r.target?.applies === true && !r.target.met) return 1;
    const router = r.full_size?.router;
    if (r.full_size?.applies === true && router && !(router.output_met && router.ttft_met)) return 1;
    const ob = r.optimized_baseline;
    return ob?.applies === true && ob.router && !ob.router.met ? 1 : 0;
  },
};
