/**
 * `bench lora --check`: the same workload run by the real-time stack
 * (sim-engine processes, a gateway per policy) and by the fleet twin, each
 * policy's figures side by side with the twin's error, and whether the two
 * rank the policies alike by adapter loads (what the bench compares). Held
 * to: output tok/s and TTFT p50 / p90 within 10 %, the same ranking of the
 * policies the real-time run tells apart (more than 10 % apart). Pure:
 * two reports in, a comparison out.
 */

import type { LoraBenchReport, LoraPolicyResult } from "./lora-policies.ts";
import { rankingAgrees } from "./ranking-agreement.ts";
import { formatTable } from "./report.ts";
import { errorText, type FigureCheck, figureCheck, TWIN_TOLERANCE, withinTolerance } from "./twin-fidelity.ts";

interface LoraPolicyCheck {
  policy: string;
  loads_per_1000: FigureCheck;
  output_tok_s: FigureCheck;
  ttft_p50_ms: FigureCheck;
  ttft_p90_ms: FigureCheck;
}

interface LoraTwinCheck {
  tolerance: number;
  policies: LoraPolicyCheck[];
  /**
   * Policies by adapter loads per 1,000 requests, fewest first, in each run;
   * `same`: every pair the real-time run tells apart (loads more than the
   * tolerance apart) is in the same order in the twin. A pair closer than
   * that is a tie: run-to-run noise orders it either way.
   */
  ranking: { real: string[]; twin: string[]; same: boolean };
  /** Output tok/s and TTFT within the tolerance for every policy, and the same ranking. */
  met: boolean;
}

const ranked = (rs: readonly LoraPolicyResult[]) => [...rs].sort((a, b) => a.loads_per_1000 - b.loads_per_1000).map((r) => r.policy);

export function loraTwinCheck(real: LoraBenchReport, twin: LoraBenchReport, tolerance = TWIN_TOLERANCE): LoraTwinCheck {
  const policies = real.results.flatMap((r): LoraPolicyCheck[] => {
    const t = twin.results.find((x) => x.policy === r.policy);
    return t
      ? [
          {
            policy: r.policy,
            loads_per_1000: figureCheck(r.loads_per_1000, t.loads_per_1000),
            output_tok_s: figureCheck(r.output_tok_per_s, t.output_tok_per_s),
            ttft_p50_ms: figureCheck(r.ttft_p50_ms, t.ttft_p50_ms),
            ttft_p90_ms: figureCheck(r.ttft_p90_ms, t.ttft_p90_ms),
          },
        ]
      : [];
  });
  const names = new Set(policies.map((p) => p.policy));
  const realRank = ranked(real.results.filter((r) => names.has(r.policy)));
  const twinRank = ranked(twin.results.filter((r) => names.has(r.policy)));
  const loads = (rs: readonly LoraPolicyResult[]) => new Map(rs.filter((r) => names.has(r.policy)).map((r) => [r.policy, r.loads_per_1000] as const));
  const same = rankingAgrees(loads(real.results), loads(twin.results), tolerance, "lower");
  const within = (f: FigureCheck) => withinTolerance(f, tolerance);
  return {
    tolerance,
    policies,
    ranking: { real: realRank, twin: twinRank, same },
    met: same && policies.length > 0 && policies.every((p) => within(p.output_tok_s) && within(p.ttft_p50_ms) && within(p.ttft_p90_ms)),
  };
}

export function formatLoraTwinCheck(c: LoraTwinCheck): string {
  const table = formatTable({
    title: `the fleet twin against the real-time run, same workload (error = (twin − real) ÷ real; output tok/s and TTFT held to ±${(c.tolerance * 100).toFixed(0)} %)`,
    columns: [
      "policy",
      "loads/1000 real",
      "twin",
      "error",
      "output tok/s real",
      "twin",
      "error",
      "TTFT p50 ms real",
      "twin",
      "error",
      "TTFT p90 ms real",
      "twin",
      "error",
    ],
    rows: c.policies.map((p) => [
      p.policy,
      p.loads_per_1000.real,
      p.loads_per_1000.twin,
      errorText(p.loads_per_1000.error),
      p.output_tok_s.real,
      p.output_tok_s.twin,
      errorText(p.output_tok_s.error),
      p.ttft_p50_ms.real,
      p.ttft_p50_ms.twin,
      errorText(p.ttft_p50_ms.error),
      p.ttft_p90_ms.real,
      p.ttft_p90_ms.twin,
      errorText(p.ttft_p90_ms.error),
    ]),
  });
  const order = `real ${c.ranking.real.join(" < ")}; twin ${c.ranking.twin.join(" < ")}`;
  const ranking = c.ranking.same
    ? `ranking by adapter loads agrees on every pair the real-time run tells apart (more than ±${(c.tolerance * 100).toFixed(0)} %): ${order}`
    : `ranking by adapter loads differs: ${order}`;
  return `${table}\n\n${ranking}\nfidelity: ${c.met ? "met" : "not met"}`;
}
