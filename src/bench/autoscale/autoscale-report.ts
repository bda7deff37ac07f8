/**
 * `bench autoscale`'s report: per start-up time and controller, combined
 * SLO attainment against average replicas and GPU-hours, beside llm-d's
 * published rows and the target; as a table, JSON, or an HTML page with
 * replicas, arrival rate, latency percentiles and attainment over time.
 */
import { htmlChart, htmlPage, htmlTable } from "../html-page.ts";
import { escapeHtml } from "../replay/svg-chart.ts";
import { formatTable } from "../report.ts";
import type { AutoscaleWorkload, ControllerResult } from "./autoscale-twin.ts";
import { LLM_D_RAMP } from "./llm-d-ramp.ts";
import { type OracleBound, oracleBound } from "./oracle-bound.ts";

interface AutoscaleReport {
  scenario: "autoscale";
  twin: true;
  workload: string;
  description: string;
  profile: string;
  slo: { ttft_ms: number; itl_ms: number; percentile: number };
  replicas: { min: number; max: number };
  target_utilization: number;
  /** llm-d's published rows and the target (the ramp only). */
  published?: typeof LLM_D_RAMP.published;
  target?: typeof LLM_D_RAMP.target;
  runs: ControllerResult[];
  /** On a trace: how low an autoscaler could go against each static fleet found (per start-up), estimated from the trace. */
  trace_estimate?: OracleBound[];
  date: string;
  commit?: string;
}

/** A report of `runs` over workload `w`; llm-d's published rows and the target beside them where `published`. */
export function autoscaleReport(o: {
  workload: string;
  description: string;
  w: AutoscaleWorkload;
  targetUtilization: number;
  runs: ControllerResult[];
  published: boolean;
  date?: string;
  commit?: string;
}): AutoscaleReport {
  return {
    scenario: "autoscale",
    twin: true,
    workload: o.workload,
    description: o.description,
    profile: o.w.profile,
    slo: { ttft_ms: o.w.slo.ttftMs, itl_ms: o.w.slo.itlMs, percentile: o.w.slo.percentile },
    replicas: { min: o.w.minReplicas, max: o.w.maxReplicas },
    target_utilization: o.targetUtilization,
    ...(o.published ? { published: LLM_D_RAMP.published, target: LLM_D_RAMP.target } : {}),
    runs: o.runs,
    ...(o.published ? {} : { trace_estimate: estimates(o.w, o.runs) }),
    date: o.date ?? new Date().toISOString(),
    ...(o.commit === undefined ? {} : { commit: o.commit }),
  };
}

/** The trace's estimate against each static fleet the runs found. */
function estimates(w: AutoscaleWorkload, runs: readonly ControllerResult[]): OracleBound[] {
  return runs.flatMap((x) => {
    const b = x.controller === "static" && x.replicas !== undefined ? oracleBound(w, x.replicas, x.startup_s) : undefined;
    return b ? [b] : [];
  });
}

const CONTROLLER_LABEL: Record<ControllerResult["controller"], string> = {
  capacity: "llmgw (capacity law)",
  oracle: "oracle (each minute's load, known ahead)",
  latency: "llm-d's formula (latency law)",
  static: "static",
};

function label(x: ControllerResult): string {
  if (x.controller === "static") return `static ${x.replicas ?? ""}`.trim();
  return x.prefill_bound === undefined ? CONTROLLER_LABEL[x.controller] : `${CONTROLLER_LABEL[x.controller]}, prefill bound: ${x.prefill_bound}`;
}

function pct(v: number): string {
  return `${(v * 100).toFixed(2)} %`;
}

export function formatAutoscaleText(r: AutoscaleReport): string {
  const rows = r.runs.map((x) => [
    label(x),
    x.startup_s,
    pct(x.attainment),
    x.requests - x.met,
    x.replicas_mean.toFixed(2),
    x.gpu_hours,
    x.ttft_p_ms,
    x.tpot_p_ms,
    `${x.scale_ups}/${x.scale_downs}`,
    x.wall_s,
  ]);
  const p = r.slo.percentile;
  const lines = [
    formatTable({
      title: `bench autoscale --twin · ${r.description}`,
      columns: ["controller", "start-up s", "attainment", "missed", "avg replicas", "GPU-hours", `TTFT p${p} ms`, `TPOT p${p} ms`, "ups/downs", "wall s"],
      rows,
    }),
    "",
    ...(r.published && r.target
      ? [
          `published (${r.published.source}): KEDA loop ${pct(r.published.keda.attainment)} at ${r.published.keda.replicas} replicas; static ${r.published.static.replicas}: ${pct(r.published.static.attainment)}`,
          `target: ≥ ${pct(r.target.attainment)} combined attainment at ≤ ${r.target.replicas} average replicas (llm-d's start-up, ${LLM_D_RAMP.startupS} s)`,
        ]
      : [...gpuHourRatios(r), ...(r.trace_estimate ?? []).map(estimateLine)]),
  ];
  return `${lines.join("\n")}\n`;
}

/** On a trace: each autoscaled run's GPU-hours against the static fleet found at the capacity law's attainment, at the same start-up. */
function gpuHourRatios(r: AutoscaleReport): string[] {
  return r.runs
    .filter((x) => x.controller !== "static")
    .flatMap((x) => {
      const s = r.runs.find((y) => y.controller === "static" && y.startup_s === x.startup_s);
      if (!s || s.gpu_hours <= 0) return [];
      return [
        `${label(x)}, start-up ${x.startup_s} s: ${(x.gpu_hours / s.gpu_hours).toFixed(2)}× the GPU-hours of a static ${s.replicas} (${pct(s.attainment)} attained)`,
      ];
    });
}

function estimateLine(b: OracleBound): string {
  return `estimate from the trace (peak minute ${b.peak_to_mean}× the mean): resized each minute with perfect foresight, ${b.gpu_hours_ratio.toFixed(2)}× a static ${b.static_replicas}; starting replicas ${b.startup_s} s ahead, ${b.gpu_hours_ratio_with_startup.toFixed(2)}×`;
}

export function renderAutoscaleHtml(r: AutoscaleReport): string {
  const charts: string[] = [];
  for (const startup of [...new Set(r.runs.map((x) => x.startup_s))]) {
    const runs = r.runs.filter((x) => x.startup_s === startup);
    const longest = runs.reduce((a, x) => (x.timeline.length > a.timeline.length ? x : a), runs[0]!);
    const x = longest.timeline.map((p) => p.at_s);
    const pad = <T>(values: T[]): (T | null)[] => x.map((_, i) => values[i] ?? null);
    const tag = `${startup}`;
    charts.push(
      htmlChart(
        `replicas-${tag}`,
        `Replicas (start-up ${startup} s)`,
        "placed, not leaving",
        x,
        "time (s)",
        runs.map((run) => ({ name: run.controller, values: pad(run.timeline.map((p) => p.provisioned)) })),
      ),
      htmlChart(`arrivals-${tag}`, "Arrival rate", "requests/s", x, "time (s)", [
        { name: "arrivals", values: pad(longest.timeline.map((p) => p.arrival_rps)) },
      ]),
      htmlChart(
        `ttft-${tag}`,
        `TTFT p${r.slo.percentile} per interval`,
        "ms",
        x,
        "time (s)",
        runs.map((run) => ({ name: run.controller, values: pad(run.timeline.map((p) => p.ttft_p_ms)) })),
      ),
      htmlChart(
        `itl-${tag}`,
        `TPOT p${r.slo.percentile} per interval`,
        "ms",
        x,
        "time (s)",
        runs.map((run) => ({ name: run.controller, values: pad(run.timeline.map((p) => p.itl_p_ms)) })),
      ),
      htmlChart(
        `attainment-${tag}`,
        "Attainment of the requests ending in each interval",
        "share",
        x,
        "time (s)",
        runs.map((run) => ({ name: run.controller, values: pad(run.timeline.map((p) => p.attainment)) })),
      ),
    );
  }
  const rows = r.runs.map((x) => [
    label(x),
    String(x.startup_s),
    pct(x.attainment),
    String(x.requests - x.met),
    x.replicas_mean.toFixed(2),
    String(x.gpu_hours),
  ]);
  const decisions = r.runs
    .filter((x) => x.controller !== "static")
    .flatMap((x) =>
      x.timeline
        .filter((p) => p.desired !== p.provisioned)
        .map((p) => [
          CONTROLLER_LABEL[x.controller],
          String(x.startup_s),
          String(p.at_s),
          `${p.provisioned} → ${p.desired}`,
          p.reason ?? "",
          String(p.arrival_rps),
        ]),
    );
  const meta = [
    escapeHtml(r.description),
    `profile <code>${escapeHtml(r.profile)}</code>`,
    `${escapeHtml(r.date)}${r.commit ? `, llmgw ${escapeHtml(r.commit)}` : ""}`,
  ].join(" · ");
  const notes = [...gpuHourRatios(r), ...(r.trace_estimate ?? []).map(estimateLine)].map((l) => `<p>${escapeHtml(l)}</p>`).join("\n");
  const body = `<h2>Controllers</h2>
${htmlTable(["controller", "start-up s", "attainment", "missed", "avg replicas", "GPU-hours"], rows, "controllers")}
${notes}
<h2>Over time</h2>
<div class="charts">
${charts.join("\n")}
</div>
<h2>Decisions that changed the count</h2>
${htmlTable(["controller", "start-up s", "at s", "replicas", "reason", "arrivals/s"], decisions, "decisions")}
`;
  return htmlPage("bench autoscale --twin", meta, body, r);
}
