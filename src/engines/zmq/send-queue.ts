/**
 * What one connection still has to write, with TCP backpressure and a
 * high-water mark counted in messages (libzmq's ZMQ_SNDHWM). Bun's
 * `socket.write` writes what the kernel takes and returns the count; the rest
 * waits here for the `drain` callback.
 */

/** The part of a Bun socket a send queue writes to. */
export interface ByteSink {
  /** Bytes taken (possibly fewer than offered), or -1 when the socket is closed. */
  write(data: Uint8Array, byteOffset: number, byteLength: number): number;
}

export type EnqueueResult = "queued" | "over-hwm" | "closed";

interface Entry {
  bytes: Uint8Array;
  /** Counted against the high-water mark (messages are; commands are not). */
  isMessage: boolean;
}

export class SendQueue {
  private entries: Entry[] = [];
  /** Bytes of entries[0] already written. */
  private written = 0;
  private messages = 0;
  private dead = false;
  private roomWaiters: Array<(open: boolean) => void> = [];

  constructor(
    private readonly sink: ByteSink,
    private readonly highWaterMark: number,
    /** Called once when a write finds the socket closed. */
    private readonly onWriteFailed: () => void,
  ) {}

  /** Messages queued and not yet fully handed to the kernel. */
  get queuedMessages(): number {
    return this.messages;
  }

  get closed(): boolean {
    return this.dead;
  }

  /** Queue a whole encoded message; refused, never cut, at the high-water mark. */
  enqueueMessage(bytes: Uint8Array): EnqueueResult {
    if (this.dead) return "closed";
    if (this.messages >= this.highWaterMark) return "over-hwm";
    this.messages++;
    this.entries.push({ bytes, isMessage: true });
    this.flush();
    return this.dead ? "closed" : "queued";
  }

  /** Queue protocol bytes (greeting, commands), which the high-water mark never refuses. */
  enqueueControl(bytes: Uint8Array): void {
    if (this.dead) return;
    this.entries.push({ bytes, isMessage: false });
    this.flush();
  }

  /** Write as much as the kernel takes; call again from the socket's `drain` callback. */
  flush(): void {
    while (!this.dead && this.entries.length > 0) {
      const head = this.entries[0]!;
      const left = head.bytes.length - this.written;
      const n = this.sink.write(head.bytes, this.written, left);
      if (n < 0) {
        this.fail();
        return;
      }
      this.written += n;
      if (n < left) break;
      this.entries.shift();
      this.written = 0;
      if (head.isMessage) this.messages--;
    }
    if (this.messages < this.lowWaterMark()) this.wakeWaiters(true);
  }

  /**
   * Resolves true once the queue is below half its high-water mark (at once
   * if it already is), false if the connection closes first. A producer with
   * more to send than the mark (a replay) awaits this instead of dropping.
   */
  waitForRoom(): Promise<boolean> {
    if (this.dead) return Promise.resolve(false);
    if (this.messages < this.lowWaterMark()) return Promise.resolve(true);
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  /** Forget everything queued; later enqueues report "closed". */
  close(): void {
    if (this.dead) return;
    this.dead = true;
    this.entries = [];
    this.messages = 0;
    this.wakeWaiters(false);
  }

  private lowWaterMark(): number {
    return Math.max(1, Math.floor(this.highWaterMark / 2));
  }

  private fail(): void {
    this.close();
    this.onWriteFailed();
  }

  private wakeWaiters(open: boolean): void {
    if (this.roomWaiters.length === 0) return;
    const waiters = this.roomWaiters;
    this.roomWaiters = [];
    for (const w of waiters) w(open);
  }
}
