/**
 * What an autoscaler reads of one model, sampled once per decision, and the
 * window of recent samples its laws look back over: arrival rate and its
 * trend, concurrency (Little's law), latency percentiles, and how many
 * sequences a replica's KV cache holds. Pure: the caller samples, on
 * whichever clock it runs.
 */

/** A serving replica as its engine's last poll described it. */
export interface ReplicaLoad {
  /** Sequences running. */
  running: number;
  /** Sequences waiting in the engine's queue. */
  waiting: number;
  /** KV cache in use, 0..1 (NaN: not reported). */
  kvUsage: number;
}

export interface AutoscaleSample {
  at: number;
  /** Requests for the model that reached the gateway since the previous sample. */
  arrivals: number;
  /** Prompt tokens of the requests that arrived since the previous sample (undefined: the sampler does not know them). */
  promptTokens?: number;
  /** Requests for the model in flight at the gateway now (waiting in admission or at an engine). */
  inflight: number;
  /** Time to first token of each first token since the previous sample, ms. */
  ttftMs: readonly number[];
  /** Mean inter-token time of each request that finished since the previous sample, ms. */
  itlMs: readonly number[];
  /** The serving replicas. */
  replicas: readonly ReplicaLoad[];
  /** Replicas placed and not leaving (starting or ready). */
  provisioned: number;
  /** Of those, serving. */
  ready: number;
  /** How many more replicas placement could add now (undefined: not known). */
  placeable?: number;
  /** The last start-up measured (launch to ready), ms; undefined until one was. */
  startupMs?: number;
}

/** KV usage below this says too little of how many sequences a full cache holds. */
const MIN_KV_USAGE_FOR_CAPACITY = 0.25;

export class SignalHistory {
  private readonly samples: AutoscaleSample[] = [];

  /** `keepMs`: the longest window any reader asks for. */
  constructor(private readonly keepMs: number) {}

  add(s: AutoscaleSample): void {
    this.samples.push(s);
    while (this.samples.length > 1 && this.samples[0]!.at < s.at - this.keepMs) this.samples.shift();
  }

  latest(): AutoscaleSample | undefined {
    return this.samples.at(-1);
  }

  /** The samples of the last `windowMs`, oldest first. */
  private within(windowMs: number): AutoscaleSample[] {
    const last = this.latest();
    if (!last) return [];
    const from = last.at - windowMs;
    return this.samples.filter((s) => s.at > from);
  }

  /**
   * Arrivals and the time they arrived in over the window: each sample counts
   * what arrived since its predecessor, so the oldest sample of the whole
   * history (no predecessor) only opens the span. `count` reads what a
   * sample counted; one that did not (undefined) leaves the total unknown.
   */
  private arrivalsOver(windowMs: number, count: (s: AutoscaleSample) => number | undefined): { n: number; spanMs: number } {
    const w = this.within(windowMs);
    if (w.length === 0) return { n: 0, spanMs: 0 };
    const first = this.samples.indexOf(w[0]!);
    const counted = first > 0 ? w : w.slice(1);
    const from = first > 0 ? this.samples[first - 1]!.at : w[0]!.at;
    let n = 0;
    for (const s of counted) {
      const c = count(s);
      if (c === undefined) return { n: NaN, spanMs: 0 };
      n += c;
    }
    return { n, spanMs: w.at(-1)!.at - from };
  }

  /** Arrivals per second over the last `windowMs` (undefined: no span to divide by yet). */
  rate(windowMs: number): number | undefined {
    const { n, spanMs } = this.arrivalsOver(windowMs, (s) => s.arrivals);
    return spanMs > 0 ? (n * 1000) / spanMs : undefined;
  }

  /** Prompt tokens arriving per second over the last `windowMs` (undefined: no span yet, or a sample in it did not count them). */
  promptTokenRate(windowMs: number): number | undefined {
    const { n, spanMs } = this.arrivalsOver(windowMs, (s) => s.promptTokens);
    return spanMs > 0 ? (n * 1000) / spanMs : undefined;
  }

  /**
   * Prompt tokens per second each serving replica took over the last
   * `windowMs`: the window's prompt-token rate over the mean count of
   * serving replicas (undefined: not known, or none served throughout).
   */
  promptTokenRatePerReplica(windowMs: number): number | undefined {
    const rate = this.promptTokenRate(windowMs);
    const w = this.within(windowMs);
    if (rate === undefined || w.some((s) => s.replicas.length === 0)) return undefined;
    return rate / (w.reduce((a, s) => a + s.replicas.length, 0) / w.length);
  }

  /** The least-squares slope of each sample's arrival rate over the last `windowMs`, per second per second (0 with fewer than 3 rates). */
  rateSlope(windowMs: number): number {
    const w = this.within(windowMs);
    const pts: { t: number; r: number }[] = [];
    for (const s of w) {
      const i = this.samples.indexOf(s);
      if (i === 0) continue;
      const dt = s.at - this.samples[i - 1]!.at;
      if (dt > 0) pts.push({ t: s.at / 1000, r: (s.arrivals * 1000) / dt });
    }
    if (pts.length < 3) return 0;
    const mt = pts.reduce((a, p) => a + p.t, 0) / pts.length;
    const mr = pts.reduce((a, p) => a + p.r, 0) / pts.length;
    let num = 0;
    let den = 0;
    for (const p of pts) {
      num += (p.t - mt) * (p.r - mr);
      den += (p.t - mt) ** 2;
    }
    return den > 0 ? num / den : 0;
  }

  /** Little's law over the window: the mean time a request stays in flight, seconds (undefined: nothing arrived). */
  timeInFlight(windowMs: number): number | undefined {
    const w = this.within(windowMs);
    const rate = this.rate(windowMs);
    if (rate === undefined || rate <= 0 || w.length === 0) return undefined;
    const meanInflight = w.reduce((a, s) => a + s.inflight, 0) / w.length;
    return meanInflight / rate;
  }

  /** The `p`-th percentile (0..100) of the window's TTFTs or ITLs, ms (undefined: none). */
  percentile(kind: "ttftMs" | "itlMs", p: number, windowMs: number): number | undefined {
    const values: number[] = [];
    for (const s of this.within(windowMs)) for (const v of s[kind]) values.push(v);
    if (values.length === 0) return undefined;
    values.sort((a, b) => a - b);
    return values[Math.min(values.length - 1, Math.ceil((p / 100) * values.length) - 1)];
  }

  /**
   * Sequences a replica's KV cache holds when full, at the window's mix of
   * prompt and answer lengths: the median over serving replicas of running
   * ÷ KV usage, where usage says enough (undefined: none did).
   */
  sequencesPerFullCache(windowMs: number): number | undefined {
    const ests: number[] = [];
    for (const s of this.within(windowMs)) {
      for (const r of s.replicas) if (r.kvUsage >= MIN_KV_USAGE_FOR_CAPACITY && r.running > 0) ests.push(r.running / r.kvUsage);
    }
    if (ests.length === 0) return undefined;
    ests.sort((a, b) => a - b);
    return ests[Math.floor(ests.length / 2)];
  }

  /** Mean sequences running per serving replica over the window (undefined: none serving). */
  runningPerReplica(windowMs: number): number | undefined {
    const cs = this.within(windowMs)
      .map(meanRunning)
      .filter((c): c is number => c !== undefined);
    return cs.length > 0 ? cs.reduce((a, c) => a + c, 0) / cs.length : undefined;
  }

  /**
   * How the time per output token grows with the sequences a replica runs:
   * τ(c) = a + b·c, least squares over the window's samples, each pairing
   * the median inter-token time of the requests that finished with the mean
   * concurrency of the last `pairMs` (a request's tokens came over its
   * life, not at the instant it ended). Undefined while the window's
   * concurrency has too little spread to fit a slope, or the slope is not
   * positive (a batch does not get faster as it grows).
   */
  tpotFit(windowMs: number, pairMs: number): { a: number; b: number } | undefined {
    const pts: { c: number; t: number }[] = [];
    const w = this.within(windowMs);
    for (let i = 0; i < w.length; i++) {
      const s = w[i]!;
      if (s.itlMs.length === 0) continue;
      const cs = this.samples
        .filter((x) => x.at > s.at - pairMs && x.at <= s.at)
        .map(meanRunning)
        .filter((c): c is number => c !== undefined);
      if (cs.length === 0) continue;
      const itl = [...s.itlMs].sort((a, b) => a - b);
      pts.push({ c: cs.reduce((a, c) => a + c, 0) / cs.length, t: itl[Math.floor(itl.length / 2)]! });
    }
    if (pts.length < MIN_FIT_POINTS) return undefined;
    const mc = pts.reduce((a, p) => a + p.c, 0) / pts.length;
    const mt = pts.reduce((a, p) => a + p.t, 0) / pts.length;
    const lo = Math.min(...pts.map((p) => p.c));
    const hi = Math.max(...pts.map((p) => p.c));
    if (mc <= 0 || (hi - lo) / mc < MIN_FIT_SPREAD) return undefined;
    let num = 0;
    let den = 0;
    for (const p of pts) {
      num += (p.c - mc) * (p.t - mt);
      den += (p.c - mc) ** 2;
    }
    const b = num / den;
    if (!(b > 0)) return undefined;
    return { a: mt - b * mc, b };
  }
}

/** A fit of inter-token time on concurrency wants this many points, spread over this share of their mean concurrency. */
const MIN_FIT_POINTS = 4;
const MIN_FIT_SPREAD = 0.2;

function meanRunning(s: AutoscaleSample): number | undefined {
  if (s.replicas.length === 0) return undefined;
  return s.replicas.reduce((a, r) => a + r.running, 0) / s.replicas.length;
}
