/**
 * `bench routing --check`: the same schedule run by the real-time stack
 * (sim-engine processes, a gateway) and by the fleet twin, each policy's
 * figures side by side with the twin's error, and whether the two rank the
 * policies the same way where the real-time run tells them apart. Pure: two
 * reports in, a comparison out.
 */

import { rankingAgrees } from "../ranking-agreement.ts";
import { formatTable } from "../report.ts";
import { errorText, type FigureCheck, figureCheck, TWIN_TOLERANCE, withinTolerance } from "../twin-fidelity.ts";
import type { PolicyReport, RoutingReport } from "./routing-report.ts";

interface PolicyCheck {
  name: string;
  output_tok_s: FigureCheck;
  ttft_p50_s: FigureCheck;
  ttft_p90_s: FigureCheck;
}

interface TwinCheck {
  tolerance: number;
  policies: PolicyCheck[];
  /** Policies by output tok/s, best first, in each run; `same`: every pair the real-time run tells apart (more than the tolerance apart) is in the same order in the twin (closer pairs are ties). */
  ranking: { real: string[]; twin: string[]; same: boolean };
  /** Every figure within the tolerance and the same ranking. */
  met: boolean;
}

const ranked = (ps: readonly PolicyReport[]) => [...ps].sort((a, b) => b.figures.output_tok_s - a.figures.output_tok_s).map((p) => p.name);

export function twinCheck(real: RoutingReport, twin: RoutingReport, tolerance = TWIN_TOLERANCE): TwinCheck {
  const policies = real.policies.flatMap((r): PolicyCheck[] => {
    const t = twin.policies.find((p) => p.name === r.name);
    if (!t) return [];
    return [
      {
        name: r.name,
        output_tok_s: figureCheck(r.figures.output_tok_s, t.figures.output_tok_s),
        ttft_p50_s: figureCheck(r.figures.ttft_s.p50, t.figures.ttft_s.p50),
        ttft_p90_s: figureCheck(r.figures.ttft_s.p90, t.figures.ttft_s.p90),
      },
    ];
  });
  const names = new Set(policies.map((p) => p.name));
  const realRank = ranked(real.policies.filter((p) => names.has(p.name)));
  const twinRank = ranked(twin.policies.filter((p) => names.has(p.name)));
  const tok = (rep: RoutingReport) => new Map(rep.policies.filter((p) => names.has(p.name)).map((p) => [p.name, p.figures.output_tok_s] as const));
  const same = rankingAgrees(tok(real), tok(twin), tolerance, "higher");
  const within = (f: FigureCheck) => withinTolerance(f, tolerance);
  return {
    tolerance,
    policies,
    ranking: { real: realRank, twin: twinRank, same },
    met: same && policies.length > 0 && policies.every((p) => within(p.output_tok_s) && within(p.ttft_p50_s) && within(p.ttft_p90_s)),
  };
}

export function formatTwinCheck(c: TwinCheck): string {
  const table = formatTable({
    title: `the fleet twin against the real-time run, same schedule (error = (twin − real) ÷ real; held to ±${(c.tolerance * 100).toFixed(0)} %)`,
    columns: ["policy", "output tok/s real", "twin", "error", "TTFT p50 s real", "twin", "error", "TTFT p90 s real", "twin", "error"],
    rows: c.policies.map((p) => [
      p.name,
      p.output_tok_s.real,
      p.output_tok_s.twin,
      errorText(p.output_tok_s.error),
      p.ttft_p50_s.real,
      p.ttft_p50_s.twin,
      errorText(p.ttft_p50_s.error),
      p.ttft_p90_s.real,
      p.ttft_p90_s.twin,
      errorText(p.ttft_p90_s.error),
    ]),
  });
  const order = `real ${c.ranking.real.join(" > ")}; twin ${c.ranking.twin.join(" > ")}`;
  const ranking = c.ranking.same
    ? `ranking by output tok/s agrees on every pair the real-time run tells apart (more than ±${(c.tolerance * 100).toFixed(0)} %): ${order}`
    : `ranking by output tok/s differs: ${order}`;
  return `${table}\n\n${ranking}\nfidelity: ${c.met ? "met" : "not met"}`;
}
