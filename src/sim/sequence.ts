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

/** The LoRA adapter a request runs with (src/sim/lora/): who it is, for the scheduler's max_loras rule and the metrics. */
export interface SeqAdapter {
  /** vLLM's lora_int_id: > 0, unique per adapter for the engine's life. */
  readonly id: number;
  readonly name: string;
}

export interface SeqRequest {
  prompt: PromptTokens;
  /** The adapter the request names as its model; absent for the base model. */
  adapter?: SeqAdapter;
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

/**
 * pending: in the API server, not yet handed to the engine; waiting: in the
 * scheduler's queue; running: holds a batch slot and is scheduled each step
 * (prefill chunks, then one token per step); prefilled holds its slot while
 * the flat model's fixed prefill time passes; stalled and paced hold their
 * slot but leave the steps (faults stall:N, slow:MS).
 */
type SeqPhase = "pending" | "waiting" | "running" | "prefilled" | "stalled" | "paced" | "done";

export class Sequence {
  phase: SeqPhase = "pending";
  generated = 0;
  /** Tokens whose KV is computed (vLLM's num_computed_tokens). */
  computed = 0;
  blocks: number[] = [];
  cachedTokens = 0;
  scheduledAt = -1;
  firstTokenAt = -1;
  lastTokenAt = -1;
  /** When it reaches the engine (arrival + the API server's own time). */
  readyAt = 0;
  /** paced: when its next token is due; prefilled: when its first token is. */
  nextAt = 0;
  constructor(
    readonly req: SeqRequest,
    readonly arrivedAt: number,
  ) {}

  /** Tokens the sequence holds in its context: the prompt and what it generated. */
  get totalTokens(): number {
    // An empty prompt still computes one position (the BOS a tokenizer would add).
    return Math.max(1, this.req.prompt.count + this.generated);
  }
}
