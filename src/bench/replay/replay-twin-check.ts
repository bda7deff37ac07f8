/**
 * `bench replay --check`: the same window replayed by the real-time stack
 * (sim-engine processes behind a gateway) and by the fleet twin, its
 * figures side by side with the twin's error. Held to: output tok/s and
 * TTFT p50 / p90 within the tolerance; the rest is shown. Pure: two reports
 * in, a comparison out.
 */
import { formatTable } from "../report.ts";
import type { TwinFailures } from "../twin-faults.ts";
import { errorText, type FigureCheck, figureCheck, TWIN_TOLERANCE, withinTolerance } from "../twin-fidelity.ts";
import type { ReplayReport } from "./replay-report.ts";

interface ReplayFigure extends FigureCheck {
  name: string;
  /** Part of the verdict (the others are shown). */
  held: boolean;
}

interface ReplayTwinCheck {
  tolerance: number;
  figures: ReplayFigure[];
  /** With --fault: what the gateway did about the faults in each run (shown, not held). */
  failures?: { real: TwinFailures; twin: TwinFailures };
  /** Every held figure within the tolerance, and the same requests answered. */
  met: boolean;
}

/** The figures compared, each read from a report; `held`: part of the verdict. */
const FIGURES: readonly { name: string; held: boolean; of(r: ReplayReport): number }[] = [
  { name: "output tok/s", held: true, of: (r) => r.output_throughput },
  { name: "TTFT p50 ms", held: true, of: (r) => r.median_ttft_ms },
  { name: "TTFT p90 ms", held: true, of: (r) => r.p90_ttft_ms ?? NaN },
  { name: "TPOT p50 ms", held: false, of: (r) => r.median_tpot_ms },
  { name: "TPOT p90 ms", held: false, of: (r) => r.p90_tpot_ms ?? NaN },
  { name: "E2EL p50 ms", held: false, of: (r) => r.median_e2el_ms },
  { name: "E2EL p90 ms", held: false, of: (r) => r.p90_e2el_ms ?? NaN },
  { name: "completed", held: false, of: (r) => r.completed },
];

export function replayTwinCheck(real: ReplayReport, twin: ReplayReport, tolerance = TWIN_TOLERANCE): ReplayTwinCheck {
  const figures = FIGURES.map((f) => ({ name: f.name, held: f.held, ...figureCheck(f.of(real), f.of(twin)) }));
  return {
    tolerance,
    figures,
    ...(real.failures && twin.failures ? { failures: { real: real.failures, twin: twin.failures } } : {}),
    met: real.completed === twin.completed && figures.every((f) => !f.held || withinTolerance(f, tolerance)),
  };
}

export function formatReplayTwinCheck(c: ReplayTwinCheck): string {
  const table = formatTable({
    title: `the fleet twin against the real-time replay of the same window (error = (twin − real) ÷ real; * held to ±${(c.tolerance * 100).toFixed(0)} %)`,
    columns: ["figure", "real-time", "twin", "error"],
    rows: c.figures.map((f) => [`${f.name}${f.held ? " *" : ""}`, f.real, f.twin, errorText(f.error)]),
  });
  const f = c.failures;
  if (!f) return `${table}\nfidelity: ${c.met ? "met" : "not met"}`;
  const at = (ms: number | null, from: number) => (ms === null ? "never" : `+${((ms - from) / 1000).toFixed(2)} s`);
  const failures = formatTable({
    title: "faults, real-time / twin (times after each fault began)",
    columns: ["", "real-time", "twin"],
    rows: [
      ["retries", f.real.retries, f.twin.retries],
      ["continued streams", f.real.recoveries, f.twin.recoveries],
      ["refused requests", f.real.refused, f.twin.refused],
      ["broken streams", f.real.broken, f.twin.broken],
      ...f.real.faults.flatMap((r, i) => {
        const t = f.twin.faults[i];
        if (!t) return [];
        return [
          [`${r.spec}: out of rotation`, `${at(r.outAtMs, r.atMs)} (${r.outBecause ?? "-"})`, `${at(t.outAtMs, t.atMs)} (${t.outBecause ?? "-"})`],
          [`${r.spec}: back`, at(r.backAtMs, r.atMs), at(t.backAtMs, t.atMs)],
        ];
      }),
    ],
  });
  return `${table}\n\n${failures}\nfidelity: ${c.met ? "met" : "not met"}`;
}
