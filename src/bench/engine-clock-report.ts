/**
 * Did the sim-engines keep their own clock through a bench? Each served
 * sim-engine measures how late its timer ran and how far its step schedule
 * slipped (src/sim/engine-clock.ts: llmgw_sim_clock_late_seconds,
 * llmgw_sim_clock_slipped_seconds_total). A bench samples them before and
 * after its measured run and reports the difference beside its figures:
 * engines that fell behind (a busy host, too many engines for its cores)
 * served a slower GPU than the one they model, and a verdict drawn from them
 * says that host, not the policy. `--strict` makes such a run exit 1.
 */
import { parsePrometheusText, sumSamples } from "../engines/prom-text.ts";
import { boolFlag, type ParsedArgs } from "../shared/flags.ts";
import { bucketQuantile, histogramBuckets } from "./prom-histogram.ts";

const LATE = "llmgw_sim_clock_late_seconds";
const SLIPPED = "llmgw_sim_clock_slipped_seconds_total";

/**
 * An engine kept its clock when its schedule slipped by less than this share
 * of the wall time measured: a slip moves the means (tokens a second, ITL
 * mean) by about as much …
 */
const MAX_SLIPPED_SHARE = 0.015;
/**
 * … and its timer ran less late than this at p99 (ms). Lateness that does
 * not slip leaves the mean gaps as they were (each token late, the next on
 * its time) but moves single token times: TTFT and ITL tails carry up to
 * this much of the host's delay. Both limits sit between what `bench
 * routing` (random and default) read on an idle 2-core host, 5–9 ms and
 * 0.1–0.9 %, and beside two CPU-bound processes, 17–19 ms and 1.8–2.4 %.
 */
const MAX_LATE_P99_MS = 15;

/** One engine's clock series at one moment; undefined series: not a sim-engine. */
export interface ClockSample {
  atMs: number;
  late: Map<number, number>;
  slippedS: number | undefined;
}

export interface EngineClockReport {
  /** Engines that export the sim's clock series (0: none is a sim-engine; nothing measured). */
  engines: number;
  /** Timer callbacks measured over all engines. */
  timers: number;
  late_p50_ms: number;
  late_p99_ms: number;
  /** The largest share of the measured wall time by which one engine's schedule slipped. */
  slipped_share_max: number;
  /** Every engine kept its clock: slip under MAX_SLIPPED_SHARE, p99 lateness under MAX_LATE_P99_MS. */
  kept: boolean;
}

/** Each engine's clock series now (an engine that does not answer counts as not a sim-engine). */
export async function sampleEngineClocks(urls: readonly string[]): Promise<ClockSample[]> {
  return Promise.all(
    urls.map(async (url) => {
      const atMs = performance.now();
      try {
        const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5_000) });
        const { samples } = parsePrometheusText(await res.text());
        return { atMs, late: histogramBuckets(samples, LATE), slippedS: sumSamples(samples, SLIPPED) };
      } catch {
        return { atMs, late: new Map<number, number>(), slippedS: undefined };
      }
    }),
  );
}

/** What the engines' clocks did between two samples (same engines, same order). */
export function engineClockReport(before: readonly ClockSample[], after: readonly ClockSample[]): EngineClockReport {
  const late = new Map<number, number>();
  let engines = 0;
  let worstShare = 0;
  after.forEach((a, i) => {
    const b = before[i];
    if (!b || a.slippedS === undefined || b.slippedS === undefined) return;
    engines++;
    for (const [le, n] of a.late) late.set(le, (late.get(le) ?? 0) + n - (b.late.get(le) ?? 0));
    const wallS = (a.atMs - b.atMs) / 1000;
    if (wallS > 0) worstShare = Math.max(worstShare, (a.slippedS - b.slippedS) / wallS);
  });
  const timers = late.get(Infinity) ?? 0;
  const p50 = timers > 0 ? bucketQuantile(late, 0.5) * 1000 : 0;
  const p99 = timers > 0 ? bucketQuantile(late, 0.99) * 1000 : 0;
  return {
    engines,
    timers,
    late_p50_ms: round2(p50),
    late_p99_ms: round2(p99),
    slipped_share_max: Math.round(worstShare * 10_000) / 10_000,
    kept: worstShare < MAX_SLIPPED_SHARE && p99 < MAX_LATE_P99_MS,
  };
}

/** A table cell: "p99 late ms / slipped %", marked BEHIND when the engines fell behind; "—" when not measured. */
export function engineClockCell(r: EngineClockReport | undefined): string {
  if (!r || r.engines === 0) return "—";
  return `${r.late_p99_ms.toFixed(1)} / ${(r.slipped_share_max * 100).toFixed(1)} %${r.kept ? "" : " BEHIND"}`;
}

/** The line under a bench's table: whether the engines kept their clock in every run; undefined when no run measured it. */
export function engineClocksLine(runs: readonly { name: string; clock: EngineClockReport | undefined }[]): string | undefined {
  const measured = runs.filter((r) => r.clock !== undefined && r.clock.engines > 0);
  if (measured.length === 0) return undefined;
  const limits = `timer p99 late under ${MAX_LATE_P99_MS} ms, schedule slipped under ${MAX_SLIPPED_SHARE * 100} % of the run`;
  const behind = measured.filter((r) => !r.clock!.kept);
  if (behind.length === 0) return `engines kept their clock in every run (${limits})`;
  const worst = behind.map((r) => `${r.name} ${engineClockCell(r.clock)}`).join(", ");
  return `ENGINES FELL BEHIND THEIR CLOCK (${limits}): ${worst}. The host starved them: these runs measured it as much as what they compare.`;
}

/** The --strict flag's line in a bench's usage. */
export const STRICT_USAGE = `  --strict             exit 1 when the sim-engines fell behind their own clock
                       (timer p99 late ≥ ${MAX_LATE_P99_MS} ms or schedule slipped ≥ ${MAX_SLIPPED_SHARE * 100} % of the run):
                       a verdict from a starved host is not one`;

/** A bench's exit code from its engines' clocks: 1 under --strict when any run's engines fell behind, else 0. */
export function strictVerdict(args: ParsedArgs, clocks: readonly (EngineClockReport | undefined)[]): number {
  return boolFlag(args, "strict") && clocks.some((c) => c !== undefined && c.engines > 0 && !c.kept) ? 1 : 0;
}

const round2 = (x: number) => Math.round(x * 100) / 100;
