/**
 * The API server in front of the engine core (pure): each request spends
 * the frontend's service time one at a time (vLLM's API server is one Python
 * process: a burst of arrivals queues for parsing and tokenisation) and its
 * latency in parallel, then reaches the scheduler's waiting queue.
 */
import type { Sequence } from "./sequence.ts";

export class FrontendQueue {
  private items: Sequence[] = [];
  private head = 0;
  private freeAt = -Infinity;
  private lastReadyAt = -Infinity;
  /** Requests still in the API server's hands (aborted ones leave at once). */
  live = 0;

  /**
   * When `s`, arriving at `now`, reaches the engine: after its turn for
   * `serviceMs` and its own `latencyMs`, and never before a request that
   * came earlier (the API server hands requests on in order).
   */
  admit(s: Sequence, now: number, serviceMs: number, latencyMs: number): number {
    this.freeAt = Math.max(now, this.freeAt) + Math.max(0, serviceMs);
    s.readyAt = Math.max(this.lastReadyAt, this.freeAt + Math.max(0, latencyMs));
    this.lastReadyAt = s.readyAt;
    if (s.readyAt > now) {
      this.items.push(s);
      this.live++;
    }
    return s.readyAt;
  }

  /** When the next request reaches the engine (Infinity when none waits here). */
  nextAt(): number {
    while (this.head < this.items.length && this.items[this.head]!.phase === "done") this.head++;
    return this.items[this.head]?.readyAt ?? Infinity;
  }

  /** Hand every request ready by `t` on, in order. */
  release(t: number, onReady: (s: Sequence) => void): void {
    while (this.head < this.items.length) {
      const s = this.items[this.head]!;
      if (s.phase === "done") {
        this.head++;
        continue;
      }
      if (s.readyAt > t) break;
      this.head++;
      this.live--;
      onReady(s);
    }
    if (this.head > 256 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }

  /** A request here was aborted. */
  forget(): void {
    this.live--;
  }
}
