/**
 * `bench routing --check`: the same schedule run by the real-time stack
 * (sim-engine processes, a gateway) and by the fleet twin, each policy's
 * figures side by side with the twin's error, and whether the two rank the
 * policies the same way where the real-time run tells them apart. Pure: two
 * reports in, a comparison out.
 */
import { rankingAgrees } from "../ranking-agreement.ts";
import { formatTable } from "../report.ts";
import type { PolicyReport, RoutingReport } from "./routing-report.ts";

/** The twin's figures within this fraction of the real-time run's: the fidelity the twin is held to. */
const TWIN_TOLERANCE = 0.1;

interface FigureCheck {
  real: number;
  twin: number;
  /** (twin − real) ÷ real; NaN when real is 0 or either is missing. */
  error: number;
}

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

function figure(real: number, twin: number): FigureCheck {
  return { real, twin, error: Number.isFinite(real) && Number.isFinite(twin) && real !== 0 ? (twin - real) / real : NaN };
}

const ranked = (ps: readonly PolicyReport[]) => [...ps].sort((a, b) => b.figures.output_tok_s - a.figures.output_tok_s).map((p) => p.name);

export function twinCheck(real: RoutingReport, twin: RoutingReport, tolerance = TWIN_TOLERANCE): TwinCheck {
  const policies = real.policies.flatMap((r): PolicyCheck[] => {
    const t = twin.policies.find((p) => p.name === r.name);
    if (!t) return [];
    return [
      {
        name: r.name,
        output_tok_s: figure(r.figures.output_tok_s, t.figures.output_tok_s),
        ttft_p50_s: figure(r.figures.ttft_s.p50, t.figures.ttft_s.p50),
        ttft_p90_s: figure(r.figures.ttft_s.p90, t.figures.ttft_s.p90),
      },
    ];
  });
  const names = new Set(policies.map((p) => p.name));
  const realRank = ranked(real.policies.filter((p) => names.has(p.name)));
  const twinRank = ranked(twin.policies.filter((p) => names.has(p.name)));
  const tok = (rep: RoutingReport) => new Map(rep.policies.filter((p) => names.has(p.name)).map((p) => [p.name, p.figures.output_tok_s] as const));
  const same = rankingAgrees(tok(real), tok(twin), tolerance, "higher");
  const within = (f: FigureCheck) => Math.abs(f.error) <= tolerance;
  return {
    tolerance,
    policies,
    ranking: { real: realRank, twin: twinRank, same },
    met: same && policies.length > 0 && policies.every((p) => within(p.output_tok_s) && within(p.ttft_p50_s) && within(p.ttft_p90_s)),
  };
}

const pct = (e: number) => (Number.isFinite(e) ? `${e >= 0 ? "+" : ""}${(e * 100).toFixed(1)} %` : "—");

export function formatTwinCheck(c: TwinCheck): string {
  const table = formatTable({
    title: `the fleet twin against the real-time run, same schedule (error = (twin − real) ÷ real; held to ±${(c.tolerance * 100).toFixed(0)} %)`,
    columns: ["policy", "output tok/s real", "twin", "error", "TTFT p50 s real", "twin", "error", "TTFT p90 s real", "twin", "error"],
    rows: c.policies.map((p) => [
      p.name,
      p.output_tok_s.real,
      p.output_tok_s.twin,
      pct(p.output_tok_s.error),
      p.ttft_p50_s.real,
      p.ttft_p50_s.twin,
      pct(p.ttft_p50_s.error),
      p.ttft_p90_s.real,
      p.ttft_p90_s.twin,
      pct(p.ttft_p90_s.error),
    ]),
  });
  const order = `real ${c.ranking.real.join(" > ")}; twin ${c.ranking.twin.join(" > ")}`;
  const ranking = c.ranking.same
    ? `ranking by output tok/s agrees on every pair the real-time run tells apart (more than ±${(c.tolerance * 100).toFixed(0)} %): ${order}`
    : `ranking by output tok/s differs: ${order}`;
  return `${table}\n\n${ranking}\nfidelity: ${c.met ? "met" : "not met"}`;
}
