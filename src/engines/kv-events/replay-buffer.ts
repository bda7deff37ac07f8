/** The last N published batches, kept for replay requests (vLLM's `deque(maxlen=buffer_steps)`). Pure. */

interface BufferedBatch {
  seq: number;
  payload: Uint8Array;
}

export class ReplayBuffer {
  private readonly ring: Array<BufferedBatch | undefined>;
  /** Index of the oldest entry. */
  private start = 0;
  private count = 0;

  constructor(readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) throw new RangeError(`replay buffer capacity must be a positive integer, got ${capacity}`);
    this.ring = new Array<BufferedBatch | undefined>(capacity);
  }

  get size(): number {
    return this.count;
  }

  /** Append; the oldest entry goes when full. Sequences must increase. */
  push(seq: number, payload: Uint8Array): void {
    const newest = this.at(this.count - 1);
    if (newest !== undefined && seq <= newest.seq) throw new RangeError(`sequence ${seq} after ${newest.seq}`);
    if (this.count < this.capacity) {
      this.ring[(this.start + this.count) % this.capacity] = { seq, payload };
      this.count++;
    } else {
      this.ring[this.start] = { seq, payload };
      this.start = (this.start + 1) % this.capacity;
    }
  }

  /** The buffered batches with `seq >= from`, oldest first, as a snapshot. */
  since(from: number): BufferedBatch[] {
    const out: BufferedBatch[] = [];
    for (let i = 0; i < this.count; i++) {
      const b = this.at(i)!;
      if (b.seq >= from) out.push(b);
    }
    return out;
  }

  private at(i: number): BufferedBatch | undefined {
    return i < 0 || i >= this.count ? undefined : this.ring[(this.start + i) % this.capacity];
  }
}
