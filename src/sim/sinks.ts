/**
 * Transports for engine sequences: an SSE stream (a ReadableStream whose
 * controller the engine loop feeds directly, one enqueue per event batch)
 * and a pending JSON response for non-streaming requests.
 */
import type { SeqSink } from "./engine.ts";
import { chatResponse, completionResponse, SSE_COMMENT_BYTES, StreamEncoder } from "./openai-response.ts";
import type { SimOutput } from "./text-model.ts";

export interface SinkOwner {
  /** The stream or response is over (finished, cut, or the client left). */
  closed(sink: Closable): void;
}

export interface Closable {
  /** Server shutdown: end the response now. */
  shutdown(): void;
}

/** Give Bun time to write what was queued before the connection is cut. */
const CUT_AFTER_HEAD_MS = 10;

/** The error a cut stream ends with (named, should a stack trace ever show it). */
export class InjectedCutError extends Error {
  constructor() {
    super("sim-engine: injected fault cut:N (connection cut on purpose)");
    this.name = "InjectedCutError";
  }
}

export class SseSink implements SeqSink, Closable {
  readonly stream: ReadableStream<Uint8Array>;
  private controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  private done = false;
  private generated = 0;
  onCancel: () => void = () => {};

  constructor(
    private readonly encoder: StreamEncoder,
    private readonly kind: "chat" | "completion",
    private readonly finishReason: "stop" | "length",
    private readonly promptTokens: number,
    private readonly owner: SinkOwner,
    /** Send an SSE comment at once so Bun flushes the headers (fault no-first-token). */
    flushHeadersNow: boolean,
  ) {
    this.stream = new ReadableStream<Uint8Array>({
      start: (c) => {
        this.controller = c;
        if (flushHeadersNow) c.enqueue(SSE_COMMENT_BYTES);
      },
      cancel: () => {
        this.markDone();
        this.onCancel();
      },
    });
  }

  token(index: number, last: boolean): void {
    const c = this.controller;
    if (this.done || !c) return;
    this.generated = index + 1;
    const chunk = this.encoder.token(index, last ? this.finishReason : null);
    if (index === 0 && this.kind === "chat") c.enqueue(StreamEncoder.concat([this.encoder.role(), chunk]));
    else c.enqueue(chunk);
  }

  finish(): void {
    const c = this.controller;
    if (this.done || !c) return;
    c.enqueue(this.encoder.end(this.promptTokens, this.generated));
    c.close();
    this.markDone();
  }

  cut(): void {
    const c = this.controller;
    if (this.done || !c) return;
    this.markDone();
    // Erroring the body makes Bun drop the connection without the final
    // chunk: the client sees a reset / truncated body, never a clean end.
    // Erroring at once would also drop the tokens still queued, so wait a beat.
    setTimeout(() => c.error(new InjectedCutError()), CUT_AFTER_HEAD_MS);
  }

  shutdown(): void {
    const c = this.controller;
    if (this.done || !c) return;
    this.markDone();
    try {
      c.close();
    } catch {
      // already closed by the client
    }
  }

  private markDone(): void {
    if (this.done) return;
    this.done = true;
    this.owner.closed(this);
  }
}

/** A non-streaming request: resolves its Response when the engine finishes (or cuts) it. */
export class JsonSink implements SeqSink, Closable {
  readonly response: Promise<Response>;
  private resolve: (r: Response) => void = () => {};
  private done = false;
  private generated = 0;

  constructor(
    private readonly kind: "chat" | "completion",
    private readonly id: string,
    private readonly created: number,
    private readonly model: string,
    private readonly output: SimOutput,
    private readonly promptTokens: number,
    private readonly owner: SinkOwner,
  ) {
    this.response = new Promise((r) => (this.resolve = r));
  }

  token(index: number): void {
    this.generated = index + 1;
  }

  finish(reason: "stop" | "length"): void {
    if (this.done) return;
    const make = this.kind === "chat" ? chatResponse : completionResponse;
    const body = make(this.id, this.created, this.model, this.output, this.generated, reason, this.promptTokens);
    this.end(new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } }));
  }

  cut(): void {
    if (this.done) return;
    // Headers and the start of the JSON, then the connection breaks.
    const head = new TextEncoder().encode(`{"id":"${this.id}",`);
    const body = new ReadableStream<Uint8Array>({
      start: (c) => {
        c.enqueue(head);
        setTimeout(() => c.error(new InjectedCutError()), CUT_AFTER_HEAD_MS);
      },
    });
    this.end(new Response(body, { headers: { "content-type": "application/json" } }));
  }

  /** The client left (or shutdown): settle the pending promise with something Bun can drop. */
  shutdown(): void {
    if (this.done) return;
    this.end(new Response(null, { status: 503 }));
  }

  private end(r: Response): void {
    this.done = true;
    this.resolve(r);
    this.owner.closed(this);
  }
}
