/**
 * The timer shared by the pollers: every interval, poll each target that is
 * not still busy with its previous poll (a slow target skips ticks instead of
 * piling up requests), all targets concurrently; stop() aborts what is in flight.
 */
import { logger } from "../shared/logger.ts";

type PollTargetFn = (position: number, signal: AbortSignal) => Promise<void>;

export class PollLoop {
  readonly #positions: () => Iterable<number>;
  readonly #intervalMs: number;
  readonly #pollTarget: PollTargetFn;
  readonly #inFlight = new Map<number, Promise<void>>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #stopper = new AbortController();
  #skipped = 0;

  /** `targets`: how many (positions 0..n-1), or the live positions, asked at every tick (targets come and go). */
  constructor(targets: number | (() => Iterable<number>), intervalMs: number, pollTarget: PollTargetFn) {
    if (!(intervalMs > 0)) throw new RangeError(`intervalMs must be > 0, got ${intervalMs}`);
    this.#positions = typeof targets === "number" ? () => Array.from({ length: targets }, (_, i) => i) : targets;
    this.#intervalMs = intervalMs;
    this.#pollTarget = pollTarget;
  }

  get running(): boolean {
    return this.#timer !== undefined;
  }

  /** Ticks skipped because the target's previous poll was still running. */
  get skippedTicks(): number {
    return this.#skipped;
  }

  /** Poll at once, then every interval. Idempotent. */
  start(): void {
    if (this.#timer !== undefined) return;
    if (this.#stopper.signal.aborted) this.#stopper = new AbortController();
    this.#tick();
    this.#timer = setInterval(() => this.#tick(), this.#intervalMs);
  }

  /** Stop the timer, abort in-flight polls and wait for them to settle. */
  async stop(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#stopper.abort();
    await Promise.allSettled([...this.#inFlight.values()]);
  }

  /** Poll every target once (joining a poll already running) and resolve when all are done. */
  async pollOnce(): Promise<void> {
    if (this.#stopper.signal.aborted) this.#stopper = new AbortController();
    const all: Promise<void>[] = [];
    for (const i of this.#positions()) all.push(this.#inFlight.get(i) ?? this.#launch(i));
    await Promise.all(all);
  }

  #tick(): void {
    for (const i of this.#positions()) {
      if (this.#inFlight.has(i)) this.#skipped++;
      else void this.#launch(i);
    }
  }

  #launch(position: number): Promise<void> {
    const p = this.#pollTarget(position, this.#stopper.signal)
      // A poll reports probe failures in its snapshot; what lands here is a
      // bug (or a throwing onSnapshot callback). Log it and keep polling.
      .catch((err: unknown) => logger().error({ err, position }, "health poll failed"))
      .finally(() => this.#inFlight.delete(position));
    this.#inFlight.set(position, p);
    return p;
  }
}
