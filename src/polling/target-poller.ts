/**
 * What every poller shares: a set of targets (added and removed at run time)
 * polled on one PollLoop (never twice at once), the latest snapshot of each,
 * and a callback per poll. Subclasses only say how one target is polled.
 */
import { PollLoop } from "./poll-loop.ts";
import type { FetchFn } from "./probe.ts";

export interface PolledTarget {
  /** Slot passed back to onSnapshot. */
  index: number;
}

interface Entry<T, S> {
  target: T;
  snapshot: S;
}

export abstract class TargetPoller<T extends PolledTarget, S> {
  protected readonly fetchFn: FetchFn;
  /** By target index; a removed target's poll in flight finds its entry gone and reports nothing. */
  private readonly entries = new Map<number, Entry<T, S>>();
  private readonly loop: PollLoop;
  private readonly initial: Readonly<S>;

  constructor(
    targets: readonly T[],
    options: { intervalMs: number; timeoutMs: number; fetch?: FetchFn | undefined },
    initial: Readonly<S>,
    private readonly onSnapshot: (index: number, snapshot: S) => void,
  ) {
    if (!(options.timeoutMs > 0)) throw new RangeError(`timeoutMs must be > 0, got ${options.timeoutMs}`);
    this.fetchFn = options.fetch ?? ((url, init) => fetch(url, init));
    this.initial = initial;
    for (const t of targets) this.add(t);
    this.loop = new PollLoop(
      () => this.entries.keys(),
      options.intervalMs,
      (index, signal) => this.run(index, signal),
    );
  }

  /** Start polling a target (replacing one with the same index); its first poll comes with the next tick. */
  add(target: T): void {
    this.entries.set(target.index, { target, snapshot: { ...this.initial } });
  }

  /** Stop polling a target; a poll of it still in flight reports nothing. */
  remove(index: number): void {
    this.entries.delete(index);
  }

  /**
   * Poll one target; the next snapshot, or undefined to keep the previous one
   * (a poll cut short by stop() says nothing about the target).
   */
  protected abstract pollTarget(target: T, previous: Readonly<S>, signal: AbortSignal): Promise<S | undefined>;

  private async run(index: number, signal: AbortSignal): Promise<void> {
    const entry = this.entries.get(index);
    if (!entry) return;
    const next = await this.pollTarget(entry.target, entry.snapshot, signal);
    if (next === undefined || signal.aborted || this.entries.get(index) !== entry) return;
    entry.snapshot = next;
    this.onSnapshot(index, next);
  }

  /** Poll now and then every intervalMs. */
  start(): void {
    this.loop.start();
  }

  /** Stop the timer and abort in-flight requests; resolves once they have settled. */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Poll every target once; resolves after every onSnapshot of this round. */
  pollOnce(): Promise<void> {
    return this.loop.pollOnce();
  }

  /** The latest snapshot of the target with slot `index`. */
  snapshot(index: number): S | undefined {
    return this.entries.get(index)?.snapshot;
  }

  /** Ticks skipped because a target's previous poll was still running. */
  get skippedTicks(): number {
    return this.loop.skippedTicks;
  }
}
