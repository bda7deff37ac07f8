/** The bytes a TCP peer has sent and nobody has parsed yet: chunks appended as they arrive, read from the front without re-joining the whole buffer. */

export class ByteQueue {
  private chunks: Uint8Array[] = [];
  /** Offset of the first unread byte inside chunks[0]. */
  private head = 0;
  private size = 0;

  get length(): number {
    return this.size;
  }

  push(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.size += chunk.length;
  }

  /** The byte `offset` positions from the front; the caller checks `length` first. */
  peekByte(offset: number): number {
    let i = this.head + offset;
    for (const chunk of this.chunks) {
      if (i < chunk.length) return chunk[i]!;
      i -= chunk.length;
    }
    throw new RangeError(`peekByte(${offset}) past the ${this.size} queued bytes`);
  }

  /** A copy of the first `n` bytes, left in the queue. */
  peek(n: number): Uint8Array {
    if (n > this.size) throw new RangeError(`peek(${n}) past the ${this.size} queued bytes`);
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = this.peekByte(i);
    return out;
  }

  /**
   * Remove and return the first `n` bytes. Within one chunk this is a view
   * (Bun hands every `data` callback a buffer of its own, so a view stays
   * valid); across chunks the bytes are copied once into a new array.
   */
  read(n: number): Uint8Array {
    if (n > this.size) throw new RangeError(`read(${n}) past the ${this.size} queued bytes`);
    const first = this.chunks[0];
    if (n === 0 || first === undefined) return new Uint8Array(0);
    if (first.length - this.head >= n) {
      const out = first.subarray(this.head, this.head + n);
      this.advance(n);
      return out;
    }
    const out = new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      const chunk = this.chunks[0]!;
      const take = Math.min(n - filled, chunk.length - this.head);
      out.set(chunk.subarray(this.head, this.head + take), filled);
      filled += take;
      this.advance(take);
    }
    return out;
  }

  /** Drop the first `n` bytes. */
  skip(n: number): void {
    if (n > this.size) throw new RangeError(`skip(${n}) past the ${this.size} queued bytes`);
    let left = n;
    while (left > 0) {
      const take = Math.min(left, this.chunks[0]!.length - this.head);
      this.advance(take);
      left -= take;
    }
  }

  clear(): void {
    this.chunks = [];
    this.head = 0;
    this.size = 0;
  }

  /** Move past `n` bytes that all lie in chunks[0]. */
  private advance(n: number): void {
    this.head += n;
    this.size -= n;
    if (this.head === this.chunks[0]!.length) {
      this.chunks.shift();
      this.head = 0;
    }
  }
}
