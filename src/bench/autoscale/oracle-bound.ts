/**
 * How low an autoscaler could go on a trace, estimated from the trace: a
 * fleet resized every minute to that minute's prompt tokens, with perfect
 * foresight and instant start-ups, each replica holding what a replica of
 * the static fleet holds at the peak minute (the static fleet's size over
 * the peak minute's tokens) — its GPU-hours against the static fleet's. A
 * second figure holds each minute's count from one start-up before it, as a
 * controller must start replicas ahead of the load they serve. An estimate:
 * what it leaves out is what happens within a minute, which the `oracle`
 * controller (that schedule, run in the twin) measures.
 */

/** What the estimate reads of a workload: its requests' times and prompts, the scored span and the replica bounds. */
interface TraceLoad {
  requests: readonly { atMs: number; segments: readonly { tokens: number }[] }[];
  scoreFromMs: number;
  minReplicas: number;
  maxReplicas: number;
}

const MINUTE_MS = 60_000;

export interface OracleBound {
  /** The static fleet the oracle is sized against. */
  static_replicas: number;
  /** Peak minute's prompt tokens over the mean minute's (scored minutes). */
  peak_to_mean: number;
  /** Perfect foresight, instant start-ups: GPU-hours over the static fleet's. */
  gpu_hours_ratio: number;
  /** The same, each minute's count held from a start-up before it. */
  gpu_hours_ratio_with_startup: number;
  startup_s: number;
}

/** Prompt tokens per minute from `fromMs` on; the last minute, cut by the trace's end, left out (it would read as a lull that is not there). */
function tokensPerMinute(w: TraceLoad, fromMs: number): number[] {
  const tokens: number[] = [];
  for (const r of w.requests) {
    if (r.atMs < fromMs) continue;
    const m = Math.floor((r.atMs - fromMs) / MINUTE_MS);
    while (tokens.length <= m) tokens.push(0);
    tokens[m]! += r.segments.reduce((a, s) => a + s.tokens, 0);
  }
  if (tokens.length > 1) tokens.pop();
  return tokens;
}

/** Replicas each minute needs, at what a replica of a static fleet of `staticReplicas` holds at the scored peak minute; each held from a start-up before it. */
function minuteCounts(w: TraceLoad, tokens: readonly number[], staticReplicas: number, peak: number, startupS: number): { need: number[]; held: number[] } {
  const perReplica = peak / staticReplicas;
  const need = tokens.map((t) => Math.min(w.maxReplicas, Math.max(w.minReplicas, Math.ceil(t / perReplica))));
  const ahead = Math.ceil((startupS * 1000) / MINUTE_MS);
  const held = need.map((_, i) => Math.max(...need.slice(i, i + ahead + 1)));
  return { need, held };
}

/** The estimate for workload `w` against a static fleet of `staticReplicas` (undefined: nothing scored). */
export function oracleBound(w: TraceLoad, staticReplicas: number, startupS: number): OracleBound | undefined {
  const tokens = tokensPerMinute(w, w.scoreFromMs);
  const peak = Math.max(0, ...tokens);
  if (tokens.length === 0 || peak <= 0 || staticReplicas <= 0) return undefined;
  const { need, held } = minuteCounts(w, tokens, staticReplicas, peak, startupS);
  const mean = (v: number[]) => v.reduce((a, x) => a + x, 0) / v.length;
  const round = (v: number) => Math.round(v * 1000) / 1000;
  return {
    static_replicas: staticReplicas,
    peak_to_mean: round(peak / mean(tokens)),
    gpu_hours_ratio: round(mean(need) / staticReplicas),
    gpu_hours_ratio_with_startup: round(mean(held) / staticReplicas),
    startup_s: startupS,
  };
}

/**
 * The oracle controller's plan: the replicas to hold in each minute from
 * the start of the workload (warm-up included), each minute's count
 * started a start-up ahead of it; the minimum after the last.
 */
export function oracleSchedule(w: TraceLoad, staticReplicas: number, startupS: number): (atMs: number) => number {
  const tokens = tokensPerMinute(w, 0);
  const peak = Math.max(0, ...tokensPerMinute(w, w.scoreFromMs));
  if (peak <= 0) return () => w.minReplicas;
  const { held } = minuteCounts(w, tokens, staticReplicas, peak, startupS);
  return (atMs) => held[Math.floor(atMs / MINUTE_MS)] ?? w.minReplicas;
}
