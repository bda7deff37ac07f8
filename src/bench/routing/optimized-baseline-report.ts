/**
 * `bench routing --experiment optimized-baseline`: the measured policies
 * beside llm-d's two published arms (round-robin and its router) — peak
 * output tok/s, TTFT p90 at the top rate, the per-rate ladder — with the
 * verdicts: the baseline within 30 % of its published peak (the sim's
 * fidelity at fleet scale), and llmgw's default's gain over round-robin at
 * least llm-d's. Pure: figures in, comparison and text out.
 */
import { formatNumber, formatTable, signedError } from "../report.ts";
import {
  OPTIMIZED_BASELINE_ARMS,
  OPTIMIZED_BASELINE_RATES,
  OPTIMIZED_BASELINE_SOURCE,
  OPTIMIZED_BASELINE_SUMMARY,
  type OptimizedBaselineArm,
} from "./published-optimized-baseline.ts";
import type { PolicyFigures } from "./routing-summary.ts";

/** The baseline arm's peak is held within this fraction of the published one. */
const TOLERANCE = 0.3;

interface ArmRow {
  arm: OptimizedBaselineArm;
  policy: string;
  what: string;
  /** The highest stage's output tok/s; NaN when the policy did not run. */
  peak_output_tok_s: number;
  published_peak_output_tok_s: number;
  /** (measured − published) ÷ published. */
  error: number;
  /** TTFT p90 of the run's last stage (the top of the ladder), s. */
  top_ttft_p90_s: number;
  published_top_ttft_p90_s: number;
}

interface RateRow {
  rate: number;
  measured: Record<string, { output_tok_s: number; ttft_p90_s: number }>;
  published: Record<OptimizedBaselineArm, { output_tok_s: number; ttft_p90_s: number | null }>;
}

export interface OptimizedBaselineComparison {
  source: string;
  tolerance: number;
  arms: ArmRow[];
  /** Per published rate, when the run's stages are the published ladder. */
  rates: RateRow[];
  /** The round-robin arm's peak within the tolerance of its published one (false when it did not run). */
  baseline_within: boolean;
  /** llmgw's default's peak ÷ round-robin's, beside llm-d's router's ÷ round-robin's; null when either did not run. */
  router: { gain: number; published_gain: number; met: boolean } | null;
  /** The run has the published shape (no shape flag changed it): the verdicts hold it. */
  applies: boolean;
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Number.isFinite(x) ? Math.round(x * f) / f : NaN;
}

export function optimizedBaselineComparison(
  policies: readonly { name: string; figures: PolicyFigures }[],
  stageRates: readonly number[],
  applies: boolean,
): OptimizedBaselineComparison {
  const byName = new Map(policies.map((p) => [p.name, p.figures]));
  const arms: ArmRow[] = OPTIMIZED_BASELINE_ARMS.map((a) => {
    const f = byName.get(a.policy);
    const pub = OPTIMIZED_BASELINE_SUMMARY[a.arm];
    const peak = f && f.stages.length > 0 ? Math.max(...f.stages.map((s) => s.output_tok_s)) : NaN;
    return {
      arm: a.arm,
      policy: a.policy,
      what: a.what,
      peak_output_tok_s: peak,
      published_peak_output_tok_s: pub.peakOutputTokS,
      error: round((peak - pub.peakOutputTokS) / pub.peakOutputTokS, 4),
      top_ttft_p90_s: f?.stages.at(-1)?.ttft_p90_s ?? NaN,
      published_top_ttft_p90_s: pub.topTtftP90S,
    };
  });
  const ladder = OPTIMIZED_BASELINE_RATES.map((r) => r.rate);
  const sameLadder = stageRates.length === ladder.length && stageRates.every((r, i) => r === ladder[i]);
  const rates: RateRow[] = sameLadder
    ? OPTIMIZED_BASELINE_RATES.map((r, i) => ({
        rate: r.rate,
        measured: Object.fromEntries(
          OPTIMIZED_BASELINE_ARMS.flatMap((a) => {
            const s = byName.get(a.policy)?.stages[i];
            return s ? [[a.policy, { output_tok_s: s.output_tok_s, ttft_p90_s: s.ttft_p90_s }]] : [];
          }),
        ),
        published: {
          "round-robin": { output_tok_s: r.outputTokS["round-robin"], ttft_p90_s: r.ttftP90S["round-robin"] },
          "llm-d": { output_tok_s: r.outputTokS["llm-d"], ttft_p90_s: r.ttftP90S["llm-d"] },
        },
      }))
    : [];
  const rr = arms.find((a) => a.arm === "round-robin")!;
  const llmd = arms.find((a) => a.arm === "llm-d")!;
  const ran = (a: ArmRow) => Number.isFinite(a.peak_output_tok_s) && a.peak_output_tok_s > 0;
  const publishedGain = round(llmd.published_peak_output_tok_s / rr.published_peak_output_tok_s, 3);
  const gain = round(llmd.peak_output_tok_s / rr.peak_output_tok_s, 3);
  return {
    source: OPTIMIZED_BASELINE_SOURCE,
    tolerance: TOLERANCE,
    arms,
    rates,
    baseline_within: ran(rr) && Math.abs(rr.error) <= TOLERANCE,
    router: ran(rr) && ran(llmd) ? { gain, published_gain: publishedGain, met: gain >= publishedGain } : null,
    applies,
  };
}

function num(x: number | null): string {
  return x !== null && Number.isFinite(x) ? formatNumber(x) : "-";
}

export function formatOptimizedBaseline(c: OptimizedBaselineComparison): string {
  const out = [
    formatTable({
      title: `llm-d's optimized baseline, published (${c.source}): each arm beside the policy that stands for it (peak: the best stage's output tok/s; top: the last stage)`,
      columns: ["arm", "policy", "peak output tok/s", "published", "error", "TTFT p90 s at the top", "published", "what the arm routes by"],
      rows: c.arms.map((a) => [
        a.arm,
        a.policy,
        num(a.peak_output_tok_s),
        num(a.published_peak_output_tok_s),
        signedError(a.error),
        num(a.top_ttft_p90_s),
        num(a.published_top_ttft_p90_s),
        a.what,
      ]),
    }),
  ];
  if (c.rates.length > 0)
    out.push(
      "",
      formatTable({
        title: 'per rate: output tok/s (TTFT p90 s), measured and published ("-": the published stage\'s latency histogram was empty)',
        columns: ["rate", ...OPTIMIZED_BASELINE_ARMS.flatMap((a) => [a.policy, `published ${a.arm}`])],
        rows: c.rates.map((r) => [
          num(r.rate),
          ...OPTIMIZED_BASELINE_ARMS.flatMap((a) => {
            const m = r.measured[a.policy];
            const p = r.published[a.arm];
            return [m ? `${num(m.output_tok_s)} (${num(m.ttft_p90_s)})` : "-", `${num(p.output_tok_s)} (${num(p.ttft_p90_s)})`];
          }),
        ]),
      }),
    );
  out.push("", `optimized baseline, round-robin's peak within ±${c.tolerance * 100} % of the published one: ${c.baseline_within ? "met" : "NOT met"}`);
  if (c.router)
    out.push(
      `optimized baseline, the default's peak over round-robin's: ${c.router.gain.toFixed(2)}× (llm-d's router: ${c.router.published_gain.toFixed(2)}×): ${c.router.met ? "met" : "NOT met"}`,
    );
  if (!c.applies) out.push("(the run's flags changed the published shape: not held to these)");
  return out.join("\n");
}
