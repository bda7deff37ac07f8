/**
 * One policy's figures from its run, as the published report computes them
 * (inference-perf's per-stage lifecycle summary). Pure: records in, figures
 * out. Every time is in simulated seconds: the wall time the client measured
 * × the engines' time scale.
 *
 * - A request belongs to the stage it was sent in; the warm-up's requests
 *   are left out.
 * - Output tok/s of a stage: the output tokens of its answered requests ÷
 *   (its first send → its last answer). The summary is the mean over the
 *   stages, as the published summary is (its rows are the means of its
 *   per-stage rows).
 * - req/s: answered requests ÷ (the first send → the last answer), over the
 *   stages. (The published req/s is requests sent ÷ the stages' length: the
 *   offered rate, the same for every scheduler.)
 * - TTFT p50/p90/mean over answered requests; ITL mean: every gap between
 *   token chunks, Σ(last token − first) ÷ Σ(tokens − 1); success: answered ÷
 *   sent.
 */

import type { RequestRecord } from "../replay/open-loop-driver.ts";
import { errorKind } from "../replay/summary.ts";
import { quantile } from "../report.ts";
import type { Stage } from "./shared-prefix-workload.ts";

interface StageFigures {
  rate: number;
  requests: number;
  answered: number;
  output_tok_s: number;
  ttft_p90_s: number;
}

export interface PolicyFigures {
  requests: number;
  answered: number;
  success: number;
  output_tok_s: number;
  req_s: number;
  ttft_s: { p50: number; p90: number; mean: number };
  itl_mean_ms: number;
  /** Distinct endpoints that served each group's requests, averaged over the groups: 1 when every prefix stays on one pod. */
  pods_per_group: number;
  /** Answered requests by the endpoint the gateway named (x-llmgw-endpoint). */
  requests_per_pod: Record<string, number>;
  stages: StageFigures[];
  errors: { error: string; count: number }[];
}

/** What the summary needs to know of each scheduled request. */
export interface RecordMeta {
  /** -1: warm-up. */
  stage: number;
  group: number;
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Number.isFinite(x) ? Math.round(x * f) / f : NaN;
}

export function policyFigures(records: readonly RequestRecord[], meta: (id: number) => RecordMeta, stages: readonly Stage[], timeScale: number): PolicyFigures {
  const sim = (wallMs: number) => (wallMs * timeScale) / 1000;
  const measured = records.filter((r) => meta(r.id).stage >= 0);
  const answered = measured.filter((r) => r.error === undefined);
  const sentAt = (r: RequestRecord) => r.atMs + r.lateMs;
  const endAt = (r: RequestRecord) => sentAt(r) + r.durationMs;

  const perStage = stages.map((stage, k): StageFigures => {
    const rs = measured.filter((r) => meta(r.id).stage === k);
    const ok = rs.filter((r) => r.error === undefined);
    let first = Infinity;
    let last = -Infinity;
    let tokens = 0;
    for (const r of rs) first = Math.min(first, sentAt(r));
    for (const r of ok) {
      last = Math.max(last, endAt(r));
      tokens += r.outputTokens;
    }
    const spanS = sim(last - first);
    return {
      rate: stage.rate,
      requests: rs.length,
      answered: ok.length,
      output_tok_s: round(ok.length > 0 && spanS > 0 ? tokens / spanS : 0, 1),
      ttft_p90_s: round(
        sim(
          quantile(
            ok.map((r) => r.ttftMs!),
            0.9,
          ),
        ),
        3,
      ),
    };
  });
  const withStages = perStage.filter((s) => s.requests > 0);

  let first = Infinity;
  let last = -Infinity;
  for (const r of measured) first = Math.min(first, sentAt(r));
  for (const r of answered) last = Math.max(last, endAt(r));
  const ttfts = answered.map((r) => r.ttftMs!);
  let decodeMs = 0;
  let gaps = 0;
  for (const r of answered) {
    if (r.tpotMs === undefined || r.outputTokens < 2) continue;
    decodeMs += r.tpotMs * (r.outputTokens - 1);
    gaps += r.outputTokens - 1;
  }

  const podsOfGroup = new Map<number, Set<string>>();
  const perPod: Record<string, number> = {};
  for (const r of answered) {
    if (r.endpoint === undefined) continue;
    perPod[r.endpoint] = (perPod[r.endpoint] ?? 0) + 1;
    const g = meta(r.id).group;
    let pods = podsOfGroup.get(g);
    if (!pods) podsOfGroup.set(g, (pods = new Set()));
    pods.add(r.endpoint);
  }
  let podSum = 0;
  for (const pods of podsOfGroup.values()) podSum += pods.size;

  const errors = new Map<string, number>();
  for (const r of measured) if (r.error !== undefined) errors.set(errorKind(r.error), (errors.get(errorKind(r.error)) ?? 0) + 1);

  return {
    requests: measured.length,
    answered: answered.length,
    success: round(measured.length > 0 ? answered.length / measured.length : NaN, 4),
    output_tok_s: round(withStages.reduce((s, x) => s + x.output_tok_s, 0) / withStages.length, 1),
    req_s: round(answered.length > 0 ? answered.length / sim(last - first) : 0, 2),
    ttft_s: {
      p50: round(sim(quantile(ttfts, 0.5)), 3),
      p90: round(sim(quantile(ttfts, 0.9)), 3),
      mean: round(sim(ttfts.reduce((s, x) => s + x, 0) / ttfts.length), 3),
    },
    itl_mean_ms: round(gaps > 0 ? (decodeMs / gaps) * timeScale : NaN, 2),
    pods_per_group: round(podsOfGroup.size > 0 ? podSum / podsOfGroup.size : NaN, 2),
    requests_per_pod: Object.fromEntries(Object.entries(perPod).sort(([a], [b]) => a.localeCompare(b, "en", { numeric: true }))),
    stages: perStage,
    errors: [...errors].map(([error, count]) => ({ error, count })).sort((a, b) => b.count - a.count),
  };
}
