/**
 * A request trace as the replay uses it, whatever file it came from: arrival
 * times and token counts, and, where the trace records prefix sharing
 * (Mooncake), the prompt's block ids. Pure: the parsers beside this file
 * turn text into a Trace; windowing is arithmetic.
 */

/** Tokens per prefix block in Mooncake's hash_ids (its publisher's block size). */
export const MOONCAKE_BLOCK_TOKENS = 512;

export interface TraceRequest {
  /** Arrival, ms after the trace's first request (which arrives at 0). */
  atMs: number;
  /** Prompt tokens. */
  inputTokens: number;
  /** Output tokens the request generated. */
  outputTokens: number;
  /**
   * Prefix-block ids, one per MOONCAKE_BLOCK_TOKENS of prompt (the last block
   * may be partial); two requests with the same leading ids share that prefix.
   * Absent when the trace records no sharing (Azure): the prompt is its own.
   */
  blockIds?: number[];
}

export interface Trace {
  /** What it is (a shipped name or the file's path). */
  name: string;
  format: "azure-csv" | "mooncake-jsonl";
  /** In arrival order. */
  requests: TraceRequest[];
  /** Last arrival − first, ms. */
  spanMs: number;
}

/** A trace file that cannot be read as its format: which line, and what is wrong with it. */
export class TraceFormatError extends Error {
  constructor(
    readonly source: string,
    readonly line: number,
    detail: string,
  ) {
    super(line > 0 ? `${source}, line ${line}: ${detail}` : `${source}: ${detail}`);
    this.name = "TraceFormatError";
  }
}

/** Sort by arrival (stable: equal times keep file order) and make the first arrival 0. */
export function normaliseArrivals(requests: TraceRequest[]): TraceRequest[] {
  const sorted = requests.every((r, i) => i === 0 || requests[i - 1]!.atMs <= r.atMs)
    ? requests
    : requests
        .map((r, i) => ({ r, i }))
        .sort((a, b) => a.r.atMs - b.r.atMs || a.i - b.i)
        .map((x) => x.r);
  const t0 = sorted[0]?.atMs ?? 0;
  if (t0 !== 0) for (const r of sorted) r.atMs -= t0;
  return sorted;
}

export function spanOf(requests: readonly TraceRequest[]): number {
  return requests.length === 0 ? 0 : requests[requests.length - 1]!.atMs - requests[0]!.atMs;
}

/** A request of a window, with its place in the whole trace (which names its own prompt text). */
export interface WindowRequest extends TraceRequest {
  index: number;
}

/**
 * The requests arriving in [startS, startS + durationS) of trace time, their
 * arrivals made relative to startS (so the window's first second is the
 * replay's first second). durationS Infinity: to the end.
 */
export function traceWindow(trace: Trace, startS: number, durationS: number): WindowRequest[] {
  const from = startS * 1000;
  const to = from + durationS * 1000;
  const out: WindowRequest[] = [];
  trace.requests.forEach((r, index) => {
    if (r.atMs >= from && r.atMs < to) out.push({ ...r, atMs: r.atMs - from, index });
  });
  return out;
}

/**
 * The share of a window's prompt tokens that sit in blocks an earlier
 * request already had, as a chain from the start (prefix caching reuses a
 * block only after the same blocks before it): the hit rate of one engine
 * with an unbounded prefix cache, the most any routing can get out of the
 * trace's sharing. undefined for a trace without block ids.
 */
export function tracePrefixShare(requests: readonly TraceRequest[]): number | undefined {
  if (requests.length === 0 || requests.some((r) => r.blockIds === undefined)) return undefined;
  const seen = new Set<string>();
  let shared = 0;
  let total = 0;
  for (const r of requests) {
    const ids = r.blockIds!;
    let chain = "";
    let reused = true;
    ids.forEach((id, j) => {
      chain += `${id},`;
      if (reused && seen.has(chain)) shared += Math.min(MOONCAKE_BLOCK_TOKENS, r.inputTokens - j * MOONCAKE_BLOCK_TOKENS);
      else reused = false;
      seen.add(chain);
    });
    total += r.inputTokens;
  }
  return shared / total;
}
