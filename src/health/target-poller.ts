/**
 * What every poller shares: a fixed list of targets polled on one PollLoop
 * (never twice at once), the latest snapshot of each, and a callback per
 * poll. Subclasses only say how one target is polled.
 */
import { PollLoop } from "./poll-loop.ts";
import type { FetchFn } from "./probe.ts";

export interface PolledTarget {
  /** Slot passed back to onSnapshot. */
  index: number;
}

export abstract class TargetPoller<T extends PolledTarget, S> {
  protected readonly targets: readonly T[];
  protected readonly fetchFn: FetchFn;
  private readonly snapshots: S[];
  private readonly loop: PollLoop;

  constructor(
    targets: readonly T[],
    options: { intervalMs: number; timeoutMs: number; fetch?: FetchFn | undefined },
    initial: Readonly<S>,
    private readonly onSnapshot: (index: number, snapshot: S) => void,
  ) {
    if (!(options.timeoutMs > 0)) throw new RangeError(`timeoutMs must be > 0, got ${options.timeoutMs}`);
    this.targets = targets;
    this.fetchFn = options.fetch ?? ((url, init) => fetch(url, init));
    this.snapshots = targets.map(() => ({ ...initial }));
    this.loop = new PollLoop(targets.length, options.intervalMs, (position, signal) => this.run(position, signal));
  }

  /**
   * Poll one target; the next snapshot, or undefined to keep the previous one
   * (a poll cut short by stop() says nothing about the target).
   */
  protected abstract pollTarget(target: T, previous: Readonly<S>, signal: AbortSignal): Promise<S | undefined>;

  private async run(position: number, signal: AbortSignal): Promise<void> {
    const target = this.targets[position]!;
    const next = await this.pollTarget(target, this.snapshots[position]!, signal);
    if (next === undefined || signal.aborted) return;
    this.snapshots[position] = next;
    this.onSnapshot(target.index, next);
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
    const position = this.targets.findIndex((t) => t.index === index);
    return position < 0 ? undefined : this.snapshots[position];
  }

  /** Ticks skipped because a target's previous poll was still running. */
  get skippedTicks(): number {
    return this.loop.skippedTicks;
  }
}
