/** A least-recently-used map bounded by bytes (not entries), with a per-entry expiry. Pure: the clock is passed in. */

interface Entry<V> {
  value: V;
  bytes: number;
  expiresAtMs: number;
}

export class LruByteCache<V> {
  /** Map order is recency: the first entry is the least recently used. */
  readonly #entries = new Map<string, Entry<V>>();
  readonly #maxBytes: number;
  #bytes = 0;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  get(key: string, nowMs: number): V | undefined {
    const e = this.#entries.get(key);
    if (e === undefined) return undefined;
    this.#entries.delete(key);
    if (e.expiresAtMs <= nowMs) {
      this.#bytes -= e.bytes;
      return undefined;
    }
    this.#entries.set(key, e);
    return e.value;
  }

  /** Store `value` costing `bytes`; evicts least recently used entries to fit. Returns false (and stores nothing) when it alone exceeds the budget. */
  set(key: string, value: V, bytes: number, expiresAtMs: number): boolean {
    this.delete(key);
    if (bytes > this.#maxBytes) return false;
    while (this.#bytes + bytes > this.#maxBytes) {
      const oldest = this.#entries.keys().next();
      if (oldest.done) break;
      this.delete(oldest.value);
    }
    this.#entries.set(key, { value, bytes, expiresAtMs });
    this.#bytes += bytes;
    return true;
  }

  delete(key: string): void {
    const e = this.#entries.get(key);
    if (e === undefined) return;
    this.#entries.delete(key);
    this.#bytes -= e.bytes;
  }

  get bytes(): number {
    return this.#bytes;
  }

  get size(): number {
    return this.#entries.size;
  }
}
