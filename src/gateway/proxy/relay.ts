/**
 * Relays an open upstream SSE stream to the client. The relay owns the
 * upstream reader from here on and ends the request through its Exchange.
 * Per upstream chunk it scans for complete events (bytes, not strings),
 * forwards them with backpressure (the upstream is read only when the client
 * has taken the previous bytes), and observes only what it must: that tokens
 * flowed (timing, once per chunk), the usage chunk (parsed, passed on only if
 * the client asked for it), [DONE]. A broken stream never looks finished: a
 * cut connection, a deadline, an oversized event or an engine error becomes
 * an explicit SSE error event then [DONE]. A client that leaves cancels the
 * upstream request at once.
 * How its bytes reach Bun's response is sse-response.ts's business.
 */
import type { AttemptFailure, Outcome } from "../../metrics/names.ts";
import { errorBody, type ErrorCode } from "../../shared/errors.ts";
import type { AttemptVerdict, Usage } from "../request/exchange.ts";
import { ENDPOINT_FAULTS } from "./failures.ts";
import { eventJson, finishedChoices, MAX_EVENT_BYTES, type EventVisitor, type ScannedEvent, type SseEventKind } from "./sse-scanner.ts";
import { drains } from "./upstream-drains.ts";
import { readMany, type OpenStream } from "./upstream.ts";

const enc = new TextEncoder();
const DONE_EVENT = enc.encode("data: [DONE]\n\n");

export function sseErrorEvent(code: ErrorCode, message: string): Uint8Array {
  return enc.encode(`data: ${JSON.stringify(errorBody(code, message))}\n\n`);
}

function readUsage(bytes: Uint8Array): Usage | undefined {
  const json = eventJson(bytes);
  const usage = typeof json === "object" && json !== null ? (json as { usage?: unknown }).usage : undefined;
  if (typeof usage !== "object" || usage === null) return undefined;
  const u = usage as Record<string, unknown>;
  return {
    prompt_tokens: typeof u.prompt_tokens === "number" ? u.prompt_tokens : 0,
    completion_tokens: typeof u.completion_tokens === "number" ? u.completion_tokens : 0,
  };
}

function engineErrorMessage(bytes: Uint8Array): string {
  const msg = (eventJson(bytes) as { error?: { message?: unknown } } | undefined)?.error?.message;
  return typeof msg === "string" ? msg : "engine reported an error mid-stream";
}

/** What the relay reports to: the request's Exchange (a small interface, so the relay is tested alone). */
export interface RelayOwner {
  /** The client asked for stream_options.include_usage. */
  readonly includeUsage: boolean;
  /** Data events relayed so far (the relay counts them). */
  delivered: number;
  /** Choices the answer has (the request's n): a stream is complete once each has a finish_reason. */
  readonly choices: number;
  usage: Usage | undefined;
  firstToken(now: number): void;
  tokens(now: number): void;
  /** An invalid event was dropped. */
  malformed(): void;
  endAttempt(verdict: AttemptVerdict): void;
  finish(outcome: Outcome, status: number, error?: string, errorCode?: ErrorCode): void;
}

/** The relay's state machine, independent of how bytes reach the client. */
export class SseRelay {
  /** Nothing more will come from next(). */
  over = false;
  private sawDone = false;
  private sentToken = false;
  /** Choices that delivered a finish_reason: with all of them (and the usage asked for), an end without [DONE] is a finished answer. */
  private finished = 0;
  private sawUsage = false;
  private first: ScannedEvent[] | undefined;
  /** The bytes for the client from this call of next() (reused: a transport writes them before calling again). */
  private readonly out: Uint8Array[] = [];
  /** A run of adjacent forwarded events not yet appended to `out`: buf[runStart, runEnd). */
  private runBuf: Uint8Array | undefined;
  private runStart = 0;
  private runEnd = 0;
  private tokensInChunk = false;
  private readonly visit: EventVisitor = (kind, buf, start, end) => this.onEvent(kind, buf, start, end);

  constructor(
    private readonly x: RelayOwner,
    private readonly open: OpenStream,
    /** Merge adjacent events of one upstream chunk into one write. */
    private readonly coalesce: boolean,
  ) {
    this.first = open.firstEvents;
    for (let i = 0; i < open.malformedDropped; i++) x.malformed();
  }

  /** The next bytes for the client (at least one piece), or undefined once the relay is over. */
  async next(): Promise<Uint8Array[] | undefined> {
    if (this.over) return undefined;
    const out = this.out;
    out.length = 0;
    if (this.first) {
      const first = this.first;
      this.first = undefined;
      for (const e of first) this.onEvent(e.kind, e.bytes, 0, e.bytes.length);
      this.endOfChunk();
      if (out.length > 0 || this.over) return out;
    }
    const { reader, scanner, deadlines } = this.open;
    while (!this.over) {
      let chunks: Uint8Array[];
      let done: boolean;
      try {
        // Everything the upstream has buffered, in one call (synchronous when
        // something is there): one pass per burst of chunks, not per chunk.
        const got = readMany(reader);
        const r = got instanceof Promise ? await got : got;
        chunks = r.value;
        done = r.done;
      } catch {
        if (this.over) break;
        if (deadlines.clientGone) {
          this.cancel(); // the client left: its abort cut the upstream read
          break;
        }
        if (deadlines.fired === "idle_timeout") this.broken("UPSTREAM_IDLE_TIMEOUT", "idle_timeout", "the engine sent nothing within the inter-token deadline");
        else if (deadlines.fired === "total_timeout") this.broken("UPSTREAM_TOTAL_TIMEOUT", "total_timeout", "the request exceeded its total deadline");
        else this.broken("UPSTREAM_STREAM_TRUNCATED", "truncated", "the engine connection broke mid-stream");
        break;
      }
      if (chunks.length > 0) deadlines.touch();
      for (const chunk of chunks) {
        if (this.over) break;
        scanner.scan(chunk, this.visit);
        this.endOfChunk();
        // Events completed before an overflow still go out, then the error.
        if (scanner.overflowed && !this.over) this.broken("UPSTREAM_MALFORMED", "malformed", `the engine sent an SSE event over ${MAX_EVENT_BYTES} bytes`);
      }
      if (done && !this.over) {
        if (this.complete()) this.finishWithoutDone();
        else if (!this.sawDone) this.broken("UPSTREAM_STREAM_TRUNCATED", "truncated", "the engine ended the stream before the answer finished");
        break;
      }
      if (out.length > 0) break;
    }
    return out;
  }

  /** Every choice delivered its finish_reason, and the usage chunk came if the client asked for it. */
  private complete(): boolean {
    return this.finished >= this.x.choices && (this.sawUsage || !this.x.includeUsage);
  }

  /**
   * A finished answer whose engine closed the stream cleanly without
   * data: [DONE] (some servers do): the answer is whole, so the client gets
   * the [DONE] it expects and the request counts as ok, nothing against the
   * engine.
   */
  private finishWithoutDone(): void {
    this.flushRun();
    this.out.push(DONE_EVENT);
    this.end("ok", { kind: "neutral" });
  }

  /** The client went away. */
  cancel(): void {
    if (this.over) return;
    this.open.deadlines.abort("client went away");
    void this.open.reader.cancel().catch(() => {});
    this.end("cancelled", { kind: "neutral" });
  }

  /** One event from upstream: what the client should see of it; [DONE] or an engine error end the relay. */
  private onEvent(kind: SseEventKind, buf: Uint8Array, start: number, end: number): void {
    if (this.over) return; // nothing after [DONE] or an error
    switch (kind) {
      case "data":
        this.tokensInChunk = true;
        this.x.delivered++;
        this.finished += finishedChoices(buf, start, end);
        return this.forward(buf, start, end);
      case "comment":
        return this.forward(buf, start, end);
      case "usage": {
        const usage = readUsage(buf.subarray(start, end));
        if (usage) {
          this.x.usage = usage;
          this.sawUsage = true;
        }
        if (this.x.includeUsage) this.forward(buf, start, end);
        return;
      }
      case "malformed":
        this.flushRun();
        return this.x.malformed();
      case "error": {
        this.flushRun();
        const message = engineErrorMessage(buf.subarray(start, end));
        this.out.push(sseErrorEvent("UPSTREAM_ERROR", message), DONE_EVENT);
        return this.end("stream_error", { kind: "fault", failure: "status_5xx" }, message, "UPSTREAM_ERROR");
      }
      case "done":
        this.flushRun();
        this.sawDone = true;
        this.out.push(DONE_EVENT);
        return this.end("ok", { kind: "neutral" });
    }
  }

  /** Forward buf[start, end): extend the current run when adjacent (one write per chunk), else start a new one. */
  private forward(buf: Uint8Array, start: number, end: number): void {
    if (this.coalesce && this.runBuf === buf && this.runEnd === start) {
      this.runEnd = end;
      return;
    }
    this.flushRun();
    this.runBuf = buf;
    this.runStart = start;
    this.runEnd = end;
    if (!this.coalesce) this.flushRun();
  }

  private flushRun(): void {
    const b = this.runBuf;
    if (!b) return;
    // The common case, a chunk that is one or more whole events, goes out as the chunk itself.
    this.out.push(this.runStart === 0 && this.runEnd === b.length ? b : b.subarray(this.runStart, this.runEnd));
    this.runBuf = undefined;
  }

  private endOfChunk(): void {
    this.flushRun();
    if (this.tokensInChunk) {
      this.tokensInChunk = false;
      this.tokensSent();
    }
  }

  private tokensSent(): void {
    const now = performance.now();
    if (this.sentToken) this.x.tokens(now);
    else {
      this.sentToken = true;
      this.x.firstToken(now);
    }
  }

  private broken(code: ErrorCode, failure: AttemptFailure, message: string): void {
    this.flushRun();
    this.out.push(sseErrorEvent(code, message), DONE_EVENT);
    const outcome: Outcome = failure === "idle_timeout" || failure === "total_timeout" ? "timeout" : "stream_error";
    const excused = this.open.deadlines.excused;
    this.end(outcome, ENDPOINT_FAULTS.has(failure) && !excused ? { kind: "fault", failure } : { kind: "neutral", failure, excused }, message, code);
  }

  private end(outcome: Outcome, verdict: AttemptVerdict, error?: string, code?: ErrorCode): void {
    if (this.over) return;
    this.over = true;
    this.open.deadlines.dispose();
    this.x.endAttempt(verdict);
    this.x.finish(outcome, 200, outcome === "ok" || outcome === "cancelled" ? undefined : error, code);
    if (outcome !== "cancelled") this.releaseUpstream();
  }

  /**
   * After [DONE], let the upstream body end on its own (so the connection can
   * be reused) but never wait on it for long; after an engine error, cancel it
   * so the engine stops generating for a client that already has its error.
   */
  private releaseUpstream(): void {
    const { reader, deadlines } = this.open;
    if (!this.sawDone) {
      deadlines.abort("stream finished with an error");
      void reader.cancel().catch(() => {});
      return;
    }
    drains.add(reader, deadlines);
  }
}
