/**
 * The report of one `llmgw bench routing` run: its JSON shape (what --json
 * prints) and its text tables — the policies measured, the published rows
 * beside them, each policy against random in both, the per-stage figures,
 * the cache arithmetic scaled and published, and the target.
 */
import { type EngineClockReport, engineClockCell, engineClocksLine } from "../engine-clock-report.ts";
import { formatNumber, formatTable, signedError } from "../report.ts";
import { formatTwinFailures, type TwinFailures } from "../twin-faults.ts";
import { formatOptimizedBaseline, type OptimizedBaselineComparison } from "./optimized-baseline-report.ts";
import { ITL_EVENTS_PER_TOKEN, PUBLISHED_SOURCE, PUBLISHED_STAGES, PUBLISHED_SUMMARY, type PublishedScheduler } from "./published-37-capacity.ts";
import type { PolicyFigures } from "./routing-summary.ts";
import type { CacheShape } from "./scaling.ts";
import type { Stage } from "./shared-prefix-workload.ts";

/** The target on the 37-capacity shape, for llmgw's default policy against random. */
const TARGET = { policy: "default", baseline: "random", outputTokSRatio: 1.6, ttftP90Ratio: 1 / 20 } as const;
/** At full size a policy's output tok/s is held to within this fraction of its published row's: the sim's fidelity at fleet scale. */
const FULL_SIZE_TOLERANCE = 0.3;
/** The published rows of schedulers that route without the prefix: how well the sim reproduces them is the sim's, not a router's, doing. */
const BASELINE_SCHEDULERS: readonly PublishedScheduler[] = ["random", "load"];
/** The published best scheduler, whose ratio over random llmgw's default is held to at full size. */
const PUBLISHED_BEST: PublishedScheduler = "precise";

/** The published experiments whose shape a run can take: llm-d's 37-capacity (scaled, or at full size), its optimized baseline (full size only) and its token-aware code-generation run (full size, twin only, its own report). */
export type RoutingExperiment = "37-capacity" | "optimized-baseline" | "codegen";

export interface RoutingRun {
  pods: number;
  profile: string;
  kv_tokens: number;
  groups: number;
  per_group: number;
  system_len: number;
  question_len: number;
  output_len: number;
  warmup: Stage | null;
  stages: Stage[];
  time_scale: number;
  seed: number;
  /** Requests of one policy's run, warm-up included. */
  requests: number;
  /** The flags every engine got (before a policy's own). */
  engine_args: string[];
  /** "real-time": sim-engine processes and a gateway on the wall clock; "twin": the fleet twin on a virtual clock. */
  clock: "real-time" | "twin";
  /** --full-size: the published token counts, KV capacity, rates and stage lengths (flags given beside it may still change them). */
  full_size: boolean;
  /** The published experiment whose shape the run has (flags given beside it may still change it). */
  experiment: RoutingExperiment;
  date: string;
  commit?: string;
}

export interface PolicyReport {
  name: string;
  description: string;
  /** A policy file's path, or "derived: scorer X". */
  source: string;
  published?: PublishedScheduler;
  figures: PolicyFigures;
  /** Prompt tokens the engines found cached ÷ prompt tokens, all engines, warm-up included. */
  prefix_cache_hit_rate: number;
  preemptions: number;
  /** KV-cache events the gateway received from the engines (what precise-prefix routes on; 0 where engines publish none). */
  kv_events_received: number;
  /** How late the load process sent (wall ms): small against the gaps between arrivals, the pacing held. */
  send_lateness_ms: { p50: number; p99: number };
  /** Whether the sim-engines kept their own clock through the load (real-time runs; absent in the twin, whose clock is virtual). */
  engine_clock?: EngineClockReport;
  /** Twin runs with --fault: what the faults did and what the gateway did about them. */
  failures?: TwinFailures;
  wall_s: number;
}

interface RatioRow {
  name: string;
  output_tok_s: number;
  ttft_p90: number;
  published?: { scheduler: PublishedScheduler; output_tok_s: number; ttft_p90: number };
}

export interface RoutingReport {
  scenario: "routing";
  run: RoutingRun;
  shape: { run: CacheShape; published: CacheShape };
  policies: PolicyReport[];
  /** Each policy ÷ random: output tok/s (higher is better) and TTFT p90 (lower is better). */
  vs_random: RatioRow[];
  /** `applies`: the run has the 37-capacity shape the target is set on (no shape flag changed). */
  target: {
    policy: string;
    output_tok_s_ratio: number;
    ttft_p90_ratio: number;
    wanted: { output_tok_s_ratio: number; ttft_p90_ratio: number };
    met: boolean;
    applies: boolean;
  } | null;
  /** At full size: the published figures held directly (null for a scaled run). */
  full_size: FullSizeVerdict | null;
  /** --experiment optimized-baseline: the policies beside llm-d's published arms (null otherwise). */
  optimized_baseline: OptimizedBaselineComparison | null;
  published: { source: string; summary: typeof PUBLISHED_SUMMARY };
}

interface FidelityRow {
  name: string;
  scheduler: PublishedScheduler;
  output_tok_s: number;
  published_output_tok_s: number;
  /** (measured − published) ÷ published. */
  error: number;
  /** The published scheduler routes without the prefix (random, load). */
  baseline: boolean;
  within: boolean;
}

interface FullSizeVerdict {
  tolerance: number;
  /** Every policy of the run with a published row. */
  fidelity: FidelityRow[];
  /** Every baseline run is within the tolerance of its published output tok/s (false when none ran). */
  baselines_within: boolean;
  /** llmgw's default against random beside the published best's against random; null when either did not run. */
  router: {
    policy: string;
    output_tok_s_ratio: number;
    ttft_p90_ratio: number;
    published: { scheduler: PublishedScheduler; output_tok_s_ratio: number; ttft_p90_ratio: number };
    /** At least the published best's gain in output tok/s. */
    output_met: boolean;
    /** At most the published best's TTFT p90 as a fraction of random's. */
    ttft_met: boolean;
  } | null;
  /** The run has the published shape (no shape flag changed it): the verdicts hold it. */
  applies: boolean;
}

export function ratios(policies: readonly PolicyReport[]): RatioRow[] {
  const random = policies.find((p) => p.name === TARGET.baseline);
  const pubRandom = PUBLISHED_SUMMARY.find((r) => r.scheduler === "random")!;
  if (!random) return [];
  return policies.map((p) => {
    const pub = p.published === undefined ? undefined : PUBLISHED_SUMMARY.find((r) => r.scheduler === p.published);
    return {
      name: p.name,
      output_tok_s: round(p.figures.output_tok_s / random.figures.output_tok_s, 3),
      ttft_p90: round(p.figures.ttft_s.p90 / random.figures.ttft_s.p90, 4),
      ...(pub
        ? {
            published: {
              scheduler: pub.scheduler,
              output_tok_s: round(pub.outputTokS / pubRandom.outputTokS, 3),
              ttft_p90: round(pub.ttftP90S / pubRandom.ttftP90S, 4),
            },
          }
        : {}),
    };
  });
}

export function targetVerdict(rows: readonly RatioRow[]): RoutingReport["target"] {
  const r = rows.find((x) => x.name === TARGET.policy);
  if (!r) return null;
  return {
    policy: TARGET.policy,
    output_tok_s_ratio: r.output_tok_s,
    ttft_p90_ratio: r.ttft_p90,
    wanted: { output_tok_s_ratio: TARGET.outputTokSRatio, ttft_p90_ratio: TARGET.ttftP90Ratio },
    met: r.output_tok_s >= TARGET.outputTokSRatio && r.ttft_p90 <= TARGET.ttftP90Ratio,
    applies: true,
  };
}

/** The full-size verdicts: each policy with a published row against it, and llmgw's default's gain over random against the published best's. */
export function fullSizeVerdict(policies: readonly PolicyReport[], rows: readonly RatioRow[], applies: boolean): FullSizeVerdict {
  const fidelity: FidelityRow[] = [];
  for (const p of policies) {
    const pub = p.published === undefined ? undefined : PUBLISHED_SUMMARY.find((r) => r.scheduler === p.published);
    if (!pub) continue;
    const error = round((p.figures.output_tok_s - pub.outputTokS) / pub.outputTokS, 4);
    fidelity.push({
      name: p.name,
      scheduler: pub.scheduler,
      output_tok_s: p.figures.output_tok_s,
      published_output_tok_s: pub.outputTokS,
      error,
      baseline: BASELINE_SCHEDULERS.includes(pub.scheduler),
      within: Math.abs(error) <= FULL_SIZE_TOLERANCE,
    });
  }
  const baselines = fidelity.filter((f) => f.baseline);
  const r = rows.find((x) => x.name === TARGET.policy);
  const best = PUBLISHED_SUMMARY.find((x) => x.scheduler === PUBLISHED_BEST)!;
  const random = PUBLISHED_SUMMARY.find((x) => x.scheduler === "random")!;
  const published = {
    scheduler: PUBLISHED_BEST,
    output_tok_s_ratio: round(best.outputTokS / random.outputTokS, 3),
    ttft_p90_ratio: round(best.ttftP90S / random.ttftP90S, 4),
  };
  return {
    tolerance: FULL_SIZE_TOLERANCE,
    fidelity,
    baselines_within: baselines.length > 0 && baselines.every((f) => f.within),
    router: r
      ? {
          policy: r.name,
          output_tok_s_ratio: r.output_tok_s,
          ttft_p90_ratio: r.ttft_p90,
          published,
          output_met: r.output_tok_s >= published.output_tok_s_ratio,
          ttft_met: r.ttft_p90 <= published.ttft_p90_ratio,
        }
      : null,
    applies,
  };
}

function formatFullSize(v: FullSizeVerdict): string[] {
  const out = [
    formatTable({
      title: `at full size, each policy against its published row (output tok/s; held within ±${v.tolerance * 100} % for the baselines: the sim's fidelity at fleet scale)`,
      columns: ["policy", "published scheduler", "output tok/s", "published", "error", "baseline", "within"],
      rows: v.fidelity.map((f) => [
        f.name,
        f.scheduler,
        num(f.output_tok_s),
        num(f.published_output_tok_s),
        signedError(f.error),
        f.baseline ? "yes" : "no",
        f.within ? "yes" : "no",
      ]),
    }),
    "",
    `full size, the baselines within ±${v.tolerance * 100} % of their published output tok/s: ${v.baselines_within ? "met" : "NOT met"}`,
  ];
  const r = v.router;
  if (r)
    out.push(
      `full size, ${r.policy} against random beside the published ${r.published.scheduler}'s: output tok/s ${ratioText(r.output_tok_s_ratio)} (published ${ratioText(r.published.output_tok_s_ratio)}): ${r.output_met ? "met" : "NOT met"}; TTFT p90 ${ratioText(r.ttft_p90_ratio)} (published ${ratioText(r.published.ttft_p90_ratio)}): ${r.ttft_met ? "met" : "NOT met"}`,
    );
  if (!v.applies) out.push("(the run's flags changed the published shape: not held to these)");
  return out;
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Number.isFinite(x) ? Math.round(x * f) / f : NaN;
}

function num(x: number): string {
  return Number.isFinite(x) ? formatNumber(x) : "-";
}

function pct(x: number): string {
  return Number.isFinite(x) ? `${(x * 100).toFixed(1)} %` : "-";
}

/** "1/23" for a ratio below 1 (TTFT: lower is better), "1.9×" above. */
export function ratioText(x: number): string {
  if (!Number.isFinite(x) || x <= 0) return "-";
  if (x >= 1) return `${x.toFixed(2)}×`;
  const inv = 1 / x;
  return `1/${inv >= 10 ? Math.round(inv) : inv.toFixed(1)}`;
}

const POLICY_COLUMNS = [
  "policy",
  "output tok/s",
  "req/s",
  "success",
  "TTFT p50 s",
  "TTFT p90 s",
  "TTFT mean s",
  "ITL mean ms",
  "prefix-cache hits",
  "pods per group",
];

function policyRows(r: RoutingReport): string[][] {
  return r.policies.map((p) => {
    const f = p.figures;
    return [
      p.name,
      num(f.output_tok_s),
      num(f.req_s),
      pct(f.success),
      num(f.ttft_s.p50),
      num(f.ttft_s.p90),
      num(f.ttft_s.mean),
      num(f.itl_mean_ms),
      pct(p.prefix_cache_hit_rate),
      num(f.pods_per_group),
    ];
  });
}

function publishedRows(): string[][] {
  return PUBLISHED_SUMMARY.map((p) => [
    p.experiment,
    num(p.outputTokS),
    num(p.reqS),
    pct(p.success),
    num(p.ttftP90S),
    num(p.ttftMeanS),
    num(p.itlMeanS * 1000 * ITL_EVENTS_PER_TOKEN),
    p.what,
  ]);
}

export function formatRoutingText(r: RoutingReport): string {
  const run = r.run;
  const stagesText = run.stages.map((s) => `${num(s.rate)}/s × ${num(s.durationS)} s`).join(", ");
  const shapeName =
    run.experiment === "optimized-baseline" ? "llm-d's optimized-baseline shape" : `37-capacity shape${run.full_size ? " at its published size" : ""}`;
  const title = `llmgw bench routing — ${shapeName}: ${run.pods} × ${run.profile}, KV ${formatNumber(run.kv_tokens)} tokens a pod; ${run.groups} groups × ${run.per_group} prompts of ${run.system_len} + ${run.question_len} tokens, ${run.output_len} out; ${run.requests} requests a policy${run.time_scale !== 1 && run.clock === "real-time" ? `; engines' clock ×${run.time_scale}` : ""}${run.clock === "twin" ? "; fleet twin (virtual clock)" : ""} (times in simulated seconds)`;
  const policiesTable = formatTable({ title, columns: POLICY_COLUMNS, rows: policyRows(r) });
  const perStage = formatTable({
    title: `per stage: output tok/s / TTFT p90 s (stages: ${stagesText})`,
    columns: ["policy", ...run.stages.map((s) => `${num(s.rate)}/s`)],
    rows: [
      ...r.policies.map((p) => [p.name, ...p.figures.stages.map((s) => `${num(s.output_tok_s)} / ${num(s.ttft_p90_s)}`)]),
      // The published stages beside them when the run has as many (each scaled from one published stage).
      ...(run.experiment !== "optimized-baseline" && run.stages.length === PUBLISHED_STAGES.random.length
        ? (["precise", "random"] as const).map((k) => [`published ${k}`, ...PUBLISHED_STAGES[k].map((s) => `${num(s.outputTokS)} / ${num(s.ttftP90S)}`)])
        : []),
    ],
  });
  const runs = formatTable({
    title: "runs",
    columns: [
      "policy",
      "source",
      "answered a pod",
      "preemptions",
      "KV events in",
      "send lateness p50 / p99 ms",
      "engines late p99 ms / slipped",
      "wall s",
      "errors",
    ],
    rows: r.policies.map((p) => [
      p.name,
      p.source,
      Object.values(p.figures.requests_per_pod).join(" / "),
      String(p.preemptions),
      String(p.kv_events_received),
      `${num(p.send_lateness_ms.p50)} / ${num(p.send_lateness_ms.p99)}`,
      engineClockCell(p.engine_clock),
      num(p.wall_s),
      p.figures.errors.map((e) => `${e.count} × ${e.error}`).join("; ") || "0",
    ]),
  });
  const out = r.optimized_baseline
    ? [policiesTable, "", formatOptimizedBaseline(r.optimized_baseline), "", perStage, "", runs]
    : [
        policiesTable,
        "",
        formatTable({
          title: `published (${PUBLISHED_SOURCE}): 4 × vLLM, Llama-3.1-70B on 4 × H100 each; req/s there is requests sent ÷ the stages' length; ITL a token is ${ITL_EVENTS_PER_TOKEN} × the published ITL mean (inference-perf counts ${ITL_EVENTS_PER_TOKEN} stream events a token)`,
          columns: ["scheduler", "output tok/s", "req/s", "success", "TTFT p90 s", "TTFT mean s", "ITL mean ms a token", "what it scores"],
          rows: publishedRows(),
        }),
        "",
        formatTable({
          title: "against random, measured and published (output tok/s × random's; TTFT p90 as a fraction of random's)",
          columns: ["policy", "output tok/s", "TTFT p90", "published scheduler", "published output tok/s", "published TTFT p90"],
          rows: r.vs_random.map((x) => [
            x.name,
            ratioText(x.output_tok_s),
            ratioText(x.ttft_p90),
            x.published?.scheduler ?? "-",
            x.published ? ratioText(x.published.output_tok_s) : "-",
            x.published ? ratioText(x.published.ttft_p90) : "-",
          ]),
        }),
        "",
        perStage,
        "",
        formatTable({
          title: "the cache, scaled and published (the report's slot arithmetic: 8 requests in flight a pod, each holding its question and half its answer)",
          columns: ["", "this run", "published"],
          rows: [
            [
              "prefix slots a pod / cluster",
              `${r.shape.run.slotsPerPod} / ${r.shape.run.slotsCluster}`,
              `${r.shape.published.slotsPerPod} / ${r.shape.published.slotsCluster}`,
            ],
            ["working set ÷ the cluster's slots", num(r.shape.run.workingSetOfCluster), num(r.shape.published.workingSetOfCluster)],
            ["working set ÷ one pod's cache", num(r.shape.run.workingSetOfPod), num(r.shape.published.workingSetOfPod)],
            ["shared share of a prompt", pct(r.shape.run.sharedShareOfPrompt), pct(r.shape.published.sharedShareOfPrompt)],
          ],
        }),
        "",
        runs,
      ];
  const failed = r.policies.flatMap((p) => (p.failures ? [{ name: p.name, failures: p.failures }] : []));
  if (failed.length > 0) out.push("", formatTwinFailures(failed));
  if (r.full_size) out.push("", ...formatFullSize(r.full_size));
  const clocks = engineClocksLine(r.policies.map((p) => ({ name: p.name, clock: p.engine_clock })));
  if (clocks) out.push("", clocks);
  if (r.target) {
    const t = r.target;
    out.push(
      "",
      `target: ${t.policy} ≥ ${t.wanted.output_tok_s_ratio}× random's output tok/s and TTFT p90 ≤ ${ratioText(t.wanted.ttft_p90_ratio)} of random's — measured ${ratioText(t.output_tok_s_ratio)} and ${ratioText(t.ttft_p90_ratio)}: ${t.met ? "met" : "NOT met"}${t.applies ? "" : " (set on the 37-capacity shape, which this run's flags changed: not held to it)"}`,
    );
  }
  return out.join("\n");
}
