/**
 * Relays an open upstream SSE stream to the client. The relay owns the
 * upstream reader from here on and ends the request through its Exchange.
 * Per upstream chunk it scans for complete events (bytes, not strings),
 * forwards them with backpressure (the upstream is read only when the client
 * has taken the previous bytes), and observes only what it must: that tokens
 * flowed (timing, once per chunk), the usage chunk (parsed, passed on only if
 * the client asked for it), [DONE]. A broken stream never looks finished: a
 * cut connection, a deadline, an oversized event or an engine error becomes
 * an explicit error — the stream dialect's (stream-dialect.ts): for chat an
 * error chunk then [DONE], for the Responses API its `error` and
 * `response.failed` events — unless a recovery (continuation/stream-recovery.ts) opens a continuation on another replica:
 * then the relay swaps that stream in and goes on, its events rewritten by
 * the recovery into the one stream the client already has. A client that
 * leaves cancels the upstream request at once.
 * How its bytes reach Bun's response is sse-response.ts's business.
 */
import type { AttemptFailure, BreakCause, Outcome } from "../../metrics/names.ts";
import type { ErrorCode } from "../../shared/errors.ts";
import type { AttemptVerdict } from "../request/exchange.ts";
import type { Evictable } from "../stream-evictions.ts";
import { ENDPOINT_FAULTS } from "./failures.ts";
import { abandon, DONE_EVENT, engineErrorMessage, type RelayOwner, type RelayRecovery, readUsage, view } from "./relay-contracts.ts";
import { type EventVisitor, finishedChoices, MAX_EVENT_BYTES, type ScannedEvent, type SseEventKind } from "./sse-scanner.ts";
import { chatToolCallStarts, dialectFor, type StreamDialect } from "./stream-dialect.ts";
import type { OpenStream } from "./upstream.ts";
import { drains } from "./upstream-drains.ts";

export type { RelayOwner, RelayRecovery } from "./relay-contracts.ts";

/** A break waiting for a continuation: what the client gets if none comes. */
interface PendingBreak {
  code: ErrorCode;
  message: string;
  outcome: Outcome;
  cause: BreakCause;
}

const NEUTRAL: AttemptVerdict = { kind: "neutral" };

/** The relay's state machine, independent of how bytes reach the client. */
export class SseRelay implements Evictable {
  /** Nothing more will come from next(). */
  over = false;
  /** A break a continuation may mend, waiting for the next call of next(). */
  private pending: PendingBreak | undefined;
  /** evict() cut the upstream on purpose: the fleet is taking its replica away. */
  private evicted = false;
  /** The recovery when it tracks what goes out (read per event). */
  private readonly watch: RelayRecovery | undefined;
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
  /** What differs between the APIs' streams (chat's shared object unless this is another API's). */
  private readonly dialect: StreamDialect;
  /** The request offered tools: tool-call starts are counted (only then is a chunk searched for them). */
  private readonly countTools: boolean;
  private readonly visit: EventVisitor = (kind, buf, start, end) => this.onEvent(kind, buf, start, end);

  constructor(
    private readonly x: RelayOwner,
    /** The upstream stream being relayed (a continuation's, after a recovery). */
    private open: OpenStream,
    private readonly recovery?: RelayRecovery,
  ) {
    this.first = open.firstEvents;
    this.dialect = dialectFor(x.route);
    this.countTools = x.offersTools === true;
    for (let i = 0; i < open.malformedDropped; i++) x.malformed();
    if (recovery?.tracking) {
      this.watch = recovery;
      recovery.bind(this);
    }
  }

  /** The next bytes for the client (at least one piece), or undefined once the relay is over. */
  async next(): Promise<Uint8Array[] | undefined> {
    if (this.over) return undefined;
    const out = this.out;
    out.length = 0;
    for (;;) {
      // A break waits here until what went out before it has been written.
      if (this.pending) await this.recover();
      if (this.first) {
        const first = this.first;
        this.first = undefined;
        for (const e of first) this.onEvent(e.kind, e.bytes, 0, e.bytes.length);
        this.endOfChunk();
      }
      if (out.length === 0 && !this.over && !this.pending) await this.read();
      if (out.length > 0 || this.over || !this.pending) return out;
    }
  }

  /** Read and relay upstream chunks until there are bytes for the client, the relay is over, or the stream broke. */
  private async read(): Promise<void> {
    const out = this.out;
    const { reader, scanner, deadlines } = this.open;
    while (!this.over && !this.pending) {
      let chunks: Uint8Array[];
      let done: boolean;
      try {
        // Everything the upstream has buffered, in one call (synchronous when
        // something is there): one pass per burst of chunks, not per chunk.
        const got = reader.readMany();
        const r = got instanceof Promise ? await got : got;
        chunks = r.value;
        done = r.done;
      } catch {
        if (this.over) break;
        if (deadlines.clientGone) {
          this.cancel(); // the client left: its abort cut the upstream read
          break;
        }
        if (this.evicted) this.drained();
        else if (deadlines.fired === "idle_timeout")
          this.broken("UPSTREAM_IDLE_TIMEOUT", "idle_timeout", "the engine sent nothing within the inter-token deadline", "stall");
        else if (deadlines.fired === "total_timeout")
          this.broken("UPSTREAM_TOTAL_TIMEOUT", "total_timeout", "the request exceeded its total deadline", undefined);
        else this.broken("UPSTREAM_STREAM_TRUNCATED", "truncated", "the engine connection broke mid-stream", "cut");
        break;
      }
      if (chunks.length > 0) deadlines.touch();
      for (const chunk of chunks) {
        if (this.over || this.pending) break;
        scanner.scan(chunk, this.visit);
        this.endOfChunk();
        // Events completed before an overflow still go out, then the error.
        if (scanner.overflowed && !this.over && !this.pending)
          this.broken("UPSTREAM_MALFORMED", "malformed", `the engine sent an SSE event over ${MAX_EVENT_BYTES} bytes`, undefined);
      }
      if (done && !this.over && !this.pending) {
        if (this.complete()) this.finishWithoutDone();
        else if (this.evicted) this.drained();
        else if (!this.sawDone) this.broken("UPSTREAM_STREAM_TRUNCATED", "truncated", "the engine ended the stream before the answer finished", "cut");
        break;
      }
      if (out.length > 0) break;
    }
  }

  /**
   * A break the recovery may mend: a continuation is swapped in (its first
   * events go out next), or the client gets the break's own error event —
   * never the error of a continuation that failed.
   */
  private async recover(): Promise<void> {
    const brk = this.pending!;
    const next = await this.recovery!.resume(brk.cause);
    this.pending = undefined;
    if (this.over) {
      // The client left while the continuation was being opened.
      if (next) abandon(next);
      return;
    }
    if (next === undefined) {
      this.out.push(...this.dialect.brokenEnd(brk.code, brk.message, this.x.delivered));
      return this.end(brk.outcome, NEUTRAL, brk.message, brk.code); // the broken attempt's verdict was given at the break
    }
    this.open = next;
    this.evicted = false;
    this.first = next.firstEvents;
    for (let i = 0; i < next.malformedDropped; i++) this.x.malformed();
  }

  /** The fleet is taking this stream's replica away (past its drain's grace period): cut the upstream now, to go on as a continuation elsewhere. */
  evict(): void {
    if (this.over || this.pending) return;
    this.evicted = true;
    this.open.deadlines.abort("the endpoint is being taken out of service");
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
    if (this.over || this.pending) return; // nothing after [DONE], an error or a break
    switch (kind) {
      case "data": {
        this.tokensInChunk = true;
        const finished = finishedChoices(buf, start, end);
        if (finished > 0) {
          this.finished += finished;
          this.x.trace?.finishEvent(view(buf, start, end));
        }
        if (this.countTools) this.x.toolCalls = (this.x.toolCalls ?? 0) + chatToolCallStarts(buf, start, end);
        const w = this.watch;
        if (w !== undefined) {
          if (w.rewriting) return this.forwardRewritten(w.rewrite("data", view(buf, start, end)));
          w.observe(view(buf, start, end));
        }
        this.x.delivered++;
        return this.forward(buf, start, end);
      }
      case "comment":
        return this.forward(buf, start, end);
      case "meta": {
        // A Responses API event that carries no token: it goes out, and tells the dialect what it needs.
        const calls = this.dialect.meta(buf, start, end);
        if (calls > 0 && this.countTools) this.x.toolCalls = (this.x.toolCalls ?? 0) + calls;
        // Anthropic's stop reason comes in a meta event (message_delta), not with the tokens.
        if (this.x.trace !== undefined && this.x.route === "messages") this.x.trace.finishEvent(view(buf, start, end));
        const w = this.watch;
        if (w !== undefined) {
          if (w.rewriting) return this.forwardCopy(w.rewrite("meta", view(buf, start, end)));
          w.observe(view(buf, start, end));
        }
        return this.forward(buf, start, end);
      }
      case "final": {
        // The Responses API's last event: the answer is whole, its usage in it.
        const w = this.watch;
        if (w?.rewriting) {
          this.forwardCopy(w.rewrite("final", view(buf, start, end)));
          this.x.usage = w.usage ?? this.x.usage;
        } else {
          this.x.usage = this.dialect.finalUsage(view(buf, start, end)) ?? this.x.usage;
          this.forward(buf, start, end);
        }
        this.flushRun();
        this.sawDone = true;
        return this.end("ok", { kind: "neutral" });
      }
      case "usage": {
        const w = this.watch;
        if (w?.rewriting) {
          // The continuation's usage becomes the whole answer's (prompt of the original, every token delivered).
          const bytes = w.rewrite("usage", view(buf, start, end));
          if (w.usage) {
            this.x.usage = w.usage;
            this.sawUsage = true;
          }
          if (this.x.includeUsage) this.forwardCopy(bytes);
          return;
        }
        const usage = readUsage(buf.subarray(start, end));
        if (usage) {
          this.x.usage = usage;
          this.sawUsage = true;
        }
        if (!this.x.includeUsage) return;
        return this.forward(buf, start, end);
      }
      case "malformed":
        this.flushRun();
        return this.x.malformed();
      case "error":
        return this.broken("UPSTREAM_ERROR", "status_5xx", engineErrorMessage(buf.subarray(start, end)), "engine_error");
      case "done":
        this.flushRun();
        this.sawDone = true;
        this.out.push(DONE_EVENT);
        return this.end("ok", { kind: "neutral" });
    }
  }

  /** Forward buf[start, end): extend the current run when adjacent (one write per chunk), else start a new one. */
  private forward(buf: Uint8Array, start: number, end: number): void {
    if (this.runBuf === buf && this.runEnd === start) {
      this.runEnd = end;
      return;
    }
    this.flushRun();
    this.runBuf = buf;
    this.runStart = start;
    this.runEnd = end;
  }

  /** Forward bytes of our own (a rewritten event); undefined: nothing to send. */
  private forwardCopy(bytes: Uint8Array | undefined): void {
    if (bytes === undefined) return;
    this.flushRun();
    this.out.push(bytes);
  }

  /** A continuation's data event as rewritten (undefined: dropped, as its role delta is: not delivered). */
  private forwardRewritten(bytes: Uint8Array | undefined): void {
    if (bytes !== undefined) this.x.delivered++;
    this.forwardCopy(bytes);
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

  /**
   * The stream broke after its first byte. With a `cause` a continuation may
   * mend it: the broken attempt ends now (its verdict counts against its
   * endpoint and model) and the recovery is tried at the next call of next().
   * Otherwise the client gets the explicit error event, then [DONE].
   */
  private broken(code: ErrorCode, failure: AttemptFailure | undefined, message: string, cause: BreakCause | undefined): void {
    this.flushRun();
    const outcome: Outcome = failure === "idle_timeout" || failure === "total_timeout" ? "timeout" : "stream_error";
    const excused = this.open.deadlines.excused;
    const verdict: AttemptVerdict =
      failure !== undefined && ENDPOINT_FAULTS.has(failure) && !excused ? { kind: "fault", failure } : { kind: "neutral", failure, excused };
    if (this.recovery !== undefined && cause !== undefined) {
      abandon(this.open);
      this.x.endAttempt(verdict);
      this.pending = { code, message, outcome, cause };
      return;
    }
    this.out.push(...this.dialect.brokenEnd(code, message, this.x.delivered));
    this.end(outcome, verdict, message, code);
  }

  /** evict() cut the upstream: not the engine's failure. */
  private drained(): void {
    this.broken("UPSTREAM_STREAM_TRUNCATED", undefined, "the endpoint was taken out of service mid-stream", "drained");
  }

  private end(outcome: Outcome, verdict: AttemptVerdict, error?: string, code?: ErrorCode): void {
    if (this.over) return;
    this.over = true;
    // A chunk that carried tokens and the end at once (a short answer read in one go): its tokens went out now, before the finish.
    if (this.tokensInChunk) {
      this.tokensInChunk = false;
      this.tokensSent();
    }
    this.recovery?.close();
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
