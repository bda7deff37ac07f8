/**
 * An open-loop load on the engine core with a virtual clock (pure, no
 * timers): requests arrive at given times whatever the engine's state, as a
 * load generator with no concurrency limit sends them, and a client gives up
 * on a request after its timeout (the engine aborts it, freeing its blocks,
 * as vLLM does when a client disconnects). Records per request when it was
 * sent, when its first and last tokens came and whether it finished.
 */
import type { EngineCore } from "./engine-core.ts";
import type { SeqSink, Sequence } from "./sequence.ts";
import type { PromptTokens } from "./tokens.ts";

export interface OpenLoopRequest {
  /** Arrival, ms after the load's start. */
  at: number;
  prompt: PromptTokens;
  /** Tokens the engine decodes (ignore_eos). */
  outputTokens: number;
}

export interface OpenLoopRecord {
  sentAt: number;
  /** -1 until the first token. */
  firstAt: number;
  lastAt: number;
  endAt: number;
  tokens: number;
  /** False when the client timed out first. */
  ok: boolean;
}

/** A run that cannot progress stops here. */
const MAX_EVENTS = 100_000_000;

/**
 * Sends `requests` (sorted by `at`) to `core` from `startAt` on the core's
 * clock and runs until every one finished or timed out; returns their records
 * in send order and the time the last one ended. The core is left as it is
 * (its cache warm) for a load that follows.
 */
export function runOpenLoop(
  core: EngineCore,
  startAt: number,
  requests: readonly OpenLoopRequest[],
  timeoutMs: number,
  /** Told each gap between two tokens of one request (ms), in the order they come. */
  onGap?: (ms: number) => void,
): { records: OpenLoopRecord[]; endAt: number } {
  const records: OpenLoopRecord[] = [];
  const seqs: Sequence[] = [];
  let now = startAt;
  let sent = 0;
  let ended = 0;
  /** The oldest request that may still time out (requests time out in send order). */
  let oldest = 0;
  let endAt = startAt;
  const send = (req: OpenLoopRequest) => {
    const rec: OpenLoopRecord = { sentAt: now, firstAt: -1, lastAt: -1, endAt: -1, tokens: 0, ok: false };
    const sink: SeqSink = {
      token: () => {
        if (rec.firstAt < 0) rec.firstAt = now;
        else onGap?.(now - rec.lastAt);
        rec.lastAt = now;
        rec.tokens++;
      },
      finish: () => {
        rec.endAt = now;
        rec.ok = true;
        ended++;
        endAt = now;
      },
      cut: () => {},
    };
    records.push(rec);
    seqs.push(
      core.submit({ prompt: req.prompt, outputTokens: req.outputTokens, finishReason: "length", stallAfter: -1, cutAfter: -1, intervalMs: 0, sink }, now),
    );
    sent++;
  };
  for (let events = 0; ended < requests.length && events < MAX_EVENTS; events++) {
    while (oldest < sent && records[oldest]!.endAt >= 0) oldest++;
    const arrival = sent < requests.length ? startAt + requests[sent]!.at : Infinity;
    const timeout = oldest < sent ? records[oldest]!.sentAt + timeoutMs : Infinity;
    const t = Math.min(arrival, core.nextEventAt(), timeout);
    if (t === Infinity) break;
    now = t;
    core.advance(t);
    while (oldest < sent && records[oldest]!.endAt < 0 && records[oldest]!.sentAt + timeoutMs <= now) {
      const rec = records[oldest]!;
      core.abort(seqs[oldest]!, true, now);
      rec.endAt = now;
      ended++;
      endAt = now;
      oldest++;
    }
    while (sent < requests.length && startAt + requests[sent]!.at <= now) send(requests[sent]!);
  }
  return { records, endAt };
}
