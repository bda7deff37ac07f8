/**
 * The deadlines of one upstream attempt on one AbortController. Bun's fetch
 * has no working connect or read timeout (see BUN-NOTES), so each deadline is
 * a timer of ours; whichever fires aborts the attempt and is remembered as the
 * reason. The idle deadline costs one timer per stream: activity only records
 * a timestamp, and the timer re-arms itself for the remainder when it fires.
 */


export type DeadlineName = "headers_timeout" | "first_token_timeout" | "idle_timeout" | "total_timeout";

export class AttemptDeadlines {
  readonly controller = new AbortController();
  /** The deadline that fired, if one did. */
  fired: DeadlineName | undefined;
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
    this.phaseTimer = setTimeout(() => this.fire("first_token_timeout"), ms);
  }

  /** Between events once streaming; call touch() on every read. */
  armIdle(ms: number): void {
    clearTimeout(this.phaseTimer);
    this.idleMs = ms;
    this.lastActivity = performance.now();
    const check = () => {
      const quiet = performance.now() - this.lastActivity;
      if (quiet >= this.idleMs) this.fire("idle_timeout");
      else this.phaseTimer = setTimeout(check, this.idleMs - quiet);
    };
    this.phaseTimer = setTimeout(check, ms);
  }

  touch(): void {
    this.lastActivity = performance.now();
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

