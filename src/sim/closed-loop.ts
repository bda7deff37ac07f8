/**
 * A closed-loop load on the engine core with a virtual clock (pure, no
 * timers): `concurrency` requests in flight until `requests` were sent, each
 * a fresh prompt of `inputTokens` (no prefix shared) answering exactly
 * `outputTokens` (ignore_eos; or lengths spread around it, as a dataset's turns), as `vllm bench serve --max-concurrency C
 * --request-rate inf --ignore-eos` drives a server. Measures what that
 * client reports: TTFT, ITL (every gap between tokens), TPOT per request,
 * end-to-end latency and output tokens per second over the run.
 */
import { type CoreConfig, type CoreTiming, EngineCore } from "./engine-core.ts";
import type { SeqSink } from "./sequence.ts";

/** The calibration sweeps have no prefix sharing: only the prompt's length matters. */
const NO_IDS = new Int32Array(0);

export interface ClosedLoopSpec {
  concurrency: number;
  requests: number;
  inputTokens: number;
  outputTokens: number;
  /** Answers vary uniformly within ± this fraction of outputTokens (from a fixed seed); 0 or absent: all equal. */
  outputSpread?: number;
}

export interface ClosedLoopResult {
  ttftMs: number[];
  itlMs: number[];
  tpotMs: number[];
  e2eMs: number[];
  outputTokens: number;
  durationMs: number;
  preemptions: number;
}

/** A step never ends when nothing is in flight; this bounds a run that cannot progress. */
const MAX_EVENTS = 50_000_000;

/**
 * Each request's answer length, in the order they are sent: `outputTokens`,
 * or spread uniformly within ± `outputSpread` of it by a fixed-seed LCG (the
 * same lengths on every run, and for the core and a served engine alike).
 */
export function answerLengths(spec: Pick<ClosedLoopSpec, "requests" | "outputTokens" | "outputSpread">): number[] {
  let seed = 0x2545f491;
  const unit = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed / 0x100000000;
  };
  const spread = spec.outputSpread ?? 0;
  return Array.from({ length: spec.requests }, () =>
    spread > 0 ? Math.max(2, Math.round(spec.outputTokens * (1 - spread + 2 * spread * unit()))) : spec.outputTokens,
  );
}

/** `random`: the engine's noise draws (seeded: the same loop on every run). */
export function runClosedLoop(config: CoreConfig, timing: CoreTiming, spec: ClosedLoopSpec, random: () => number): ClosedLoopResult {
  const core = new EngineCore(config, timing, random);
  const out: ClosedLoopResult = { ttftMs: [], itlMs: [], tpotMs: [], e2eMs: [], outputTokens: 0, durationMs: 0, preemptions: 0 };
  let now = 0;
  let sent = 0;
  let done = 0;
  const queue: number[] = [];
  const lengths = answerLengths(spec);
  const send = (at: number) => {
    const sentAt = at;
    const outputTokens = lengths[sent]!;
    let first = -1;
    let last = -1;
    const sink: SeqSink = {
      token: () => {
        if (first < 0) {
          first = now;
          out.ttftMs.push(now - sentAt);
        } else out.itlMs.push(now - last);
        last = now;
        out.outputTokens++;
      },
      finish: () => {
        out.e2eMs.push(now - sentAt);
        if (outputTokens > 1) out.tpotMs.push((last - first) / (outputTokens - 1));
        done++;
        if (sent < spec.requests) queue.push(now);
      },
      cut: () => {},
    };
    core.submit(
      {
        prompt: { count: spec.inputTokens, ids: NO_IDS, blockHashes: [], state: sent, continued: 0 },
        outputTokens,
        finishReason: "length",
        stallAfter: -1,
        cutAfter: -1,
        intervalMs: 0,
        sink,
      },
      at,
    );
    sent++;
  };
  for (let i = 0; i < Math.min(spec.concurrency, spec.requests); i++) send(0);
  for (let events = 0; done < spec.requests && events < MAX_EVENTS; events++) {
    const t = core.nextEventAt();
    if (t === Infinity) break;
    now = t;
    core.advance(t);
    while (queue.length > 0 && sent < spec.requests) send(queue.shift()!);
  }
  out.durationMs = now;
  out.preemptions = core.stats.preemptions;
  return out;
}

export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const i = (s.length - 1) * p;
  const lo = Math.floor(i);
  const hi = Math.ceil(i);
  return s[lo]! + (s[hi]! - s[lo]!) * (i - lo);
}

export function mean(xs: readonly number[]): number {
  return xs.length === 0 ? NaN : xs.reduce((a, b) => a + b, 0) / xs.length;
}
