/**
 * The life of one streamed answer's body, shared by every streaming route
 * of the sim-engine (chat and completions, Responses, transcriptions): the
 * headers at once, bytes until the answer ends, an injected cut that drops
 * the connection, a server shutdown, and the owner told once when it is
 * over. The routes add only what they write.
 */
import { SSE_COMMENT_BYTES } from "./openai-response.ts";

export interface Closable {
  /** Server shutdown: end the response now. */
  shutdown(): void;
}

export interface SinkOwner {
  /** The stream or response is over (finished, cut, or the client left). */
  closed(sink: Closable): void;
}

/** Give Bun time to write what was queued before the connection is cut. */
export const CUT_AFTER_MS = 10;
/** The longest a cut waits for Bun to take the bytes queued before it. */
const CUT_WAIT_MAX_MS = 2_000;

/** The error a cut stream ends with (named, should a stack trace ever show it). */
export class InjectedCutError extends Error {
  constructor() {
    super("sim-engine: injected fault cut:N (connection cut on purpose)");
    this.name = "InjectedCutError";
  }
}

export abstract class AnswerStream implements Closable {
  readonly stream: ReadableStream<Uint8Array>;
  /** The client left. */
  onCancel: () => void = () => {};
  #controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  #done = false;

  constructor(private readonly owner: SinkOwner) {
    this.stream = new ReadableStream<Uint8Array>({
      start: (c) => {
        this.#controller = c;
        // vLLM sends the response headers at once; Bun sends them only with the
        // first body bytes (oven-sh/bun PR #33660), so an SSE comment goes first.
        c.enqueue(SSE_COMMENT_BYTES);
      },
      cancel: () => {
        this.#markDone();
        this.onCancel();
      },
    });
  }

  /** Whether bytes can still be sent (started, not ended, cut or left). */
  protected get open(): boolean {
    return this.#controller !== undefined && !this.#done;
  }

  /** Queues bytes; nothing once the stream is over. */
  protected send(bytes: Uint8Array): void {
    if (this.open) this.#controller!.enqueue(bytes);
  }

  /** A clean end, after `last` bytes. */
  protected end(last?: Uint8Array): void {
    if (!this.open) return;
    if (last !== undefined) this.#controller!.enqueue(last);
    this.#controller!.close();
    this.#markDone();
  }

  /**
   * Erroring the body makes Bun drop the connection without the final
   * chunk: the client sees a reset / truncated body, never a clean end.
   * Erroring would also drop the bytes still queued, so the cut waits until
   * Bun has taken them all (on a busy host that can take far longer than a
   * beat), then a beat more for the socket write, and at most CUT_WAIT_MAX_MS
   * in all: a client that stopped reading is cut anyway.
   */
  cut(): void {
    const c = this.#controller;
    if (!this.open || c === undefined) return;
    this.#markDone();
    const giveUpAt = performance.now() + CUT_WAIT_MAX_MS;
    const cutWhenTaken = () => {
      if ((c.desiredSize ?? 1) <= 0 && performance.now() < giveUpAt) setTimeout(cutWhenTaken, CUT_AFTER_MS);
      else setTimeout(() => c.error(new InjectedCutError()), CUT_AFTER_MS);
    };
    cutWhenTaken();
  }

  shutdown(): void {
    const c = this.#controller;
    if (!this.open || c === undefined) return;
    this.#markDone();
    try {
      c.close();
    } catch {
      // already closed by the client
    }
  }

  #markDone(): void {
    if (this.#done) return;
    this.#done = true;
    this.owner.closed(this);
  }
}
