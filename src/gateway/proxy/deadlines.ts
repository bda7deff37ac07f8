/**
 * The deadlines of one upstream attempt on one AbortController. Bun's fetch
 * has no working connect or read timeout (Bun 1.4 ignores `connectTimeout`;
 * its `timeout` option fires seconds late), so each deadline is
 * a timer of ours; whichever fires aborts the attempt and is remembered as the
 * reason. The idle deadline costs one timer per stream: activity only records
 * a timestamp, and the timer re-arms itself for the remainder when it fires.
 *
 * A silence deadline (first token, inter-token) that comes due while the
 * gateway's own event loop had stalled measured the gateway: the engine's
 * bytes may be sitting unread in the socket. It then waits one short
 * recheck (the reader gets its turn); if it fires after all, it is marked
 * `excused` and is not counted against the engine.
 */
import { loopLag, STALL_MS } from "../../shared/loop-lag.ts";

/** After a stall, how long a silence deadline waits for the reader to catch up before firing. */
const STALL_RECHECK_MS = 50;

type DeadlineName = "headers_timeout" | "first_token_timeout" | "idle_timeout" | "total_timeout";

export class AttemptDeadlines {
  readonly controller = new AbortController();
  /** The deadline that fired, if one did. */
  fired: DeadlineName | undefined;
  /** It fired while the gateway's own event loop had stalled: not the engine's failure. */
  excused = false;
  /** A silence deadline already waited out one stall since the last activity. */
  private deferred = false;
  private phaseTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly totalTimer: ReturnType<typeof setTimeout>;
  private lastActivity = 0;
  private idleMs = 0;
  private readonly client: AbortSignal | undefined;
  private readonly onClientAbort: (() => void) | undefined;

  /**
   * `client`: the client's signal; its abort aborts the attempt too. One
   * listener, removed by dispose(): AbortSignal.any() left a composite
   * signal behind per request (measured: 1,287 of 2,000 still alive after a
   * full collection), and costs more than a listener.
   */
  constructor(totalMs: number, client?: AbortSignal) {
    this.totalTimer = setTimeout(() => this.fire("total_timeout"), Math.max(0, totalMs));
    if (client) {
      this.client = client;
      this.onClientAbort = () => this.abort("client went away");
      if (client.aborted) this.onClientAbort();
      else client.addEventListener("abort", this.onClientAbort, { once: true });
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  private fire(name: DeadlineName): void {
    if (this.controller.signal.aborted) return;
    this.fired = name;
    this.controller.abort(new Error(name));
  }

  /** Until the response headers arrive. */
  armHeaders(ms: number): void {
    clearTimeout(this.phaseTimer);
    this.phaseTimer = setTimeout(() => this.fire("headers_timeout"), ms);
  }

  /** From the headers to the first SSE event. */
  armFirstToken(ms: number): void {
    clearTimeout(this.phaseTimer);
    const armedAt = performance.now();
    const check = () => {
      if (!this.waitOutStall(armedAt, ms, check)) this.fire("first_token_timeout");
    };
    this.phaseTimer = setTimeout(check, ms);
  }

  /**
   * A silence of `limitMs` measured since `since` is due: if the loop
   * stalled within it, and without the stall the silence would not have
   * reached the limit, recheck once shortly (true: deferred); if it is
   * still due after that, fire excused. An engine silent for the whole limit
   * besides the stall is still the engine's failure.
   */
  private waitOutStall(since: number, limitMs: number, recheck: () => void): boolean {
    const now = performance.now();
    const stalled = loopLag.stalledWithin(since, now);
    if (stalled < STALL_MS || now - since - stalled >= limitMs) return false;
    if (!this.deferred) {
      this.deferred = true;
      this.phaseTimer = setTimeout(recheck, STALL_RECHECK_MS);
      return true;
    }
    this.excused = true;
    return false;
  }

  /** Between events once streaming; call touch() on every read. */
  armIdle(ms: number): void {
    clearTimeout(this.phaseTimer);
    this.idleMs = ms;
    this.lastActivity = performance.now();
    const check = () => {
      const quiet = performance.now() - this.lastActivity;
      if (quiet < this.idleMs) this.phaseTimer = setTimeout(check, this.idleMs - quiet);
      else if (!this.waitOutStall(this.lastActivity, this.idleMs, check)) this.fire("idle_timeout");
    };
    this.phaseTimer = setTimeout(check, ms);
  }

  touch(): void {
    this.lastActivity = performance.now();
    this.deferred = false;
  }

  /** The client went away (its abort is what aborted the attempt). */
  get clientGone(): boolean {
    return this.client?.aborted === true;
  }

  /** Stop every timer (the attempt is over). */
  dispose(): void {
    clearTimeout(this.phaseTimer);
    clearTimeout(this.totalTimer);
    if (this.onClientAbort) this.client?.removeEventListener("abort", this.onClientAbort);
  }

  abort(reason: string): void {
    if (!this.controller.signal.aborted) this.controller.abort(new Error(reason));
  }
}
