/** The scheduler's FIFO of waiting sequences: append at the tail, preempted ones back at the head, aborted ones skipped lazily. */
import type { Sequence } from "./sequence.ts";

export class WaitQueue {
  private items: Sequence[] = [];
  private head = 0;
  /** Sequences in the queue still waiting (aborted ones leave the count at once). */
  live = 0;

  push(s: Sequence): void {
    this.items.push(s);
    this.live++;
  }

  /** A preempted sequence goes back to the front (vLLM: waiting.prepend_request). */
  unshift(s: Sequence): void {
    if (this.head > 0) this.items[--this.head] = s;
    else this.items.unshift(s);
    this.live++;
  }

  /** The first sequence still waiting, or undefined. */
  peek(): Sequence | undefined {
    while (this.head < this.items.length) {
      const s = this.items[this.head]!;
      if (s.phase === "waiting") return s;
      this.head++;
    }
    return undefined;
  }

  /** Remove the head returned by peek(). */
  shift(): void {
    this.head++;
    this.live--;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }

  /** Every sequence still waiting, in queue order. */
  forEachLive(fn: (s: Sequence) => void): void {
    for (let i = this.head; i < this.items.length; i++) {
      const s = this.items[i]!;
      if (s.phase === "waiting") fn(s);
    }
  }

  /** A waiting sequence was aborted: it stays in the array until reached, but no longer counts. */
  forget(): void {
    this.live--;
  }
}
