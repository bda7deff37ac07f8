/** One request inside the simulated engine: what it asks for, where its tokens go, and its scheduling state. */
import type { PromptTokens } from "./tokens.ts";

/** Where a sequence's tokens go (an SSE stream, a pending JSON response …). */
export interface SeqSink {
  /** Token `index` (0-based) was generated; `last` on the final one. */
  token(index: number, last: boolean): void;
  /** Called after the last token, when the request has finished. */
  finish(reason: "stop" | "length"): void;
  /** Fault `cut:N`: drop the connection now. */
  cut(): void;
}

export interface SeqRequest {
  prompt: PromptTokens;
  outputTokens: number;
  finishReason: "stop" | "length";
  /** Stop producing after this many tokens and hold (-1: never). */
  stallAfter: number;
  /** Cut the connection after this many tokens (-1: never). */
  cutAfter: number;
  /** Own token interval in ms instead of the engine's steps (0: engine steps). */
  intervalMs: number;
  sink: SeqSink;
}

export type SeqPhase = "waiting" | "prefill" | "decode" | "stalled" | "done";

export class Sequence {
  phase: SeqPhase = "waiting";
  generated = 0;
  blocks: number[] = [];
  cachedTokens = 0;
  scheduledAt = -1;
  prefillDoneAt = 0;
  firstTokenAt = -1;
  lastTokenAt = -1;
  nextAt = 0;
  constructor(
    readonly req: SeqRequest,
    readonly arrivedAt: number,
  ) {}
}

