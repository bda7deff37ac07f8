/**
 * The timer shared by the pollers: every interval, poll each target that is
 * not still busy with its previous poll (a slow target skips ticks instead of
 * piling up requests), all targets concurrently; stop() aborts what is in flight.
 * Targets are positions 0..count-1, or keys read afresh on every tick (node
 * agents come and go while the loop runs).
 */
import { logger } from "../shared/logger.ts";

export type PollTargetFn<K = number> = (key: K, signal: AbortSignal) => Promise<void>;

function positions(count: number): () => number[] {
  const all = Array.from({ length: count }, (_, i) => i);
  return () => all;
}

export class PollLoop<K = number> {
  readonly #keys: () => Iterable<K>;
  readonly #intervalMs: number;
  readonly #pollTarget: PollTargetFn<K>;
  readonly #inFlight = new Map<K, Promise<void>>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #stopper = new AbortController();
  #skipped = 0;

  constructor(count: number, intervalMs: number, pollTarget: PollTargetFn<number>);
  constructor(keys: () => Iterable<K>, intervalMs: number, pollTarget: PollTargetFn<K>);
  constructor(keys: number | (() => Iterable<K>), intervalMs: number, pollTarget: PollTargetFn<K>) {
    if (!(intervalMs > 0)) throw new RangeError(`intervalMs must be > 0, got ${intervalMs}`);
    // With a count, K is number (the first overload), so the positions are keys.
    this.#keys = typeof keys === "number" ? (positions(keys) as unknown as () => Iterable<K>) : keys;
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
    for (const key of this.#keys()) all.push(this.#inFlight.get(key) ?? this.#launch(key));
    await Promise.all(all);
  }

  #tick(): void {
    for (const key of this.#keys()) {
      if (this.#inFlight.has(key)) this.#skipped++;
      else void this.#launch(key);
    }
  }

  #launch(key: K): Promise<void> {
    const p = this.#pollTarget(key, this.#stopper.signal)
      // A poll reports probe failures in its snapshot; what lands here is a
      // bug (or a throwing onSnapshot callback). Log it and keep polling.
      .catch((err: unknown) => logger().error({ err, target: key }, "health poll failed"))
      .finally(() => this.#inFlight.delete(key));
    this.#inFlight.set(key, p);
    return p;
  }
}
