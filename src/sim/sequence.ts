/** One request inside the simulated engine: what it asks for, where its tokens go, and its scheduling state. */
import { SimOutput } from "./text-model.ts";
import { extendBlockHashes, type PromptTokens, WORD_BASE } from "./tokens.ts";

/** Where a sequence's tokens go (an SSE stream, a pending JSON response …). */
export interface SeqSink {
  /** Token `index` (0-based) was generated; `last` on the final one. */
  token(index: number, last: boolean): void;
  /** Called after the last token, when the request has finished; `cachedTokens`: its prompt tokens found in the prefix cache when first scheduled (vLLM's num_cached_tokens). */
  finish(reason: "stop" | "length", cachedTokens: number): void;
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
  /** The model state the answer's tokens follow from (a choice of n > 1 samples its own); absent: the prompt's. */
  outputState?: number;
  /**
   * The client's parameters, for vLLM's request_params_* histograms: `n` on
   * the first choice of each prompt (recorded at its first token, once per
   * request as vLLM's parent request does), `maxTokens` on every choice
   * (recorded when it finishes). Absent: the client gave none.
   */
  params?: { n?: number; maxTokens?: number };
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
  /** Tokens found in the prefix cache when it was first scheduled (vLLM's num_cached_tokens: a resumption does not change it). */
  cachedTokens = 0;
  scheduledAt = -1;
  firstTokenAt = -1;
  lastTokenAt = -1;
  /** When it reaches the engine (arrival + the API server's own time). */
  readyAt = 0;
  /** paced: when its next token is due; prefilled: when its first token is. */
  nextAt = 0;
  /** Chained hashes of its full blocks, the prompt's and then those its output fills (vLLM's request.block_hashes). */
  blockHashes: bigint[];
  /** The prompt's ids and then the output's, as far as they were asked for. */
  private idBuf: Int32Array | undefined;
  private idLen = 0;
  private output: SimOutput | undefined;

  constructor(
    readonly req: SeqRequest,
    readonly arrivedAt: number,
  ) {
    this.blockHashes = req.prompt.blockHashes;
  }

  /**
   * Hash its first `blocks` full blocks where not done yet, the generated
   * tokens' blocks too (vLLM hashes every full block of a request as its
   * tokens arrive); the number of blocks that have a hash, at most
   * `blocks`. A prompt without ids (a bench's, counted only) has none.
   */
  hashFullBlocks(blocks: number, blockSize: number): number {
    const p = this.req.prompt;
    const keys = p.hashKeys;
    if (keys === undefined || p.ids.length !== p.count) return Math.min(blocks, this.blockHashes.length);
    const upTo = Math.min(blocks, Math.floor((p.count + this.generated) / blockSize));
    if (upTo > this.blockHashes.length) {
      if (this.blockHashes === p.blockHashes) this.blockHashes = p.blockHashes.slice();
      extendBlockHashes(this.blockHashes, this.tokenIds(upTo * blockSize), upTo, blockSize, keys);
    }
    return Math.max(upTo, Math.min(blocks, this.blockHashes.length));
  }

  /** The ids of its first `n` tokens (n at most the prompt's and the generated tokens): generated words are one token each. */
  tokenIds(n: number): Int32Array {
    const p = this.req.prompt;
    if (n <= p.count) return p.ids.subarray(0, n);
    if (!this.idBuf || this.idBuf.length < n) {
      const buf = new Int32Array(Math.max(n, 2 * (this.idBuf?.length ?? 0), p.count + 16));
      if (this.idBuf) buf.set(this.idBuf.subarray(0, this.idLen));
      else {
        buf.set(p.ids);
        this.idLen = p.count;
      }
      this.idBuf = buf;
    }
    if (this.idLen < n) {
      this.output ??= new SimOutput(this.req.outputState ?? p.state);
      for (let k = this.idLen; k < n; k++) this.idBuf[k] = WORD_BASE + this.output.tokenIndex(k - p.count);
      this.idLen = n;
    }
    return this.idBuf.subarray(0, n);
  }

  /** Tokens the sequence holds in its context: the prompt and what it generated. */
  get totalTokens(): number {
    // An empty prompt still computes one position (the BOS a tokenizer would add).
    return Math.max(1, this.req.prompt.count + this.generated);
  }
}
