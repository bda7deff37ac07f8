/**
 * The continuable streams open on each endpoint slot, so that the fleet can
 * move them elsewhere at once when it takes a replica away past its drain's
 * grace period: evict(slot) tells each one to cut its upstream and
 * go on as a continuation on another replica, instead of being cut by the
 * engine's stop. Per stream: one Set insertion when it opens, one deletion
 * when it ends.
 */

/** A stream that can be told to leave its endpoint now. */
export interface Evictable {
  evict(): void;
}

export class StreamEvictions {
  private readonly bySlot = new Map<number, Set<Evictable>>();

  enter(slot: number, stream: Evictable): void {
    let set = this.bySlot.get(slot);
    if (!set) this.bySlot.set(slot, (set = new Set()));
    set.add(stream);
  }

  leave(slot: number, stream: Evictable): void {
    const set = this.bySlot.get(slot);
    if (!set) return;
    set.delete(stream);
    if (set.size === 0) this.bySlot.delete(slot);
  }

  /** Streams open on the slot now. */
  count(slot: number): number {
    return this.bySlot.get(slot)?.size ?? 0;
  }

  /** Tell every stream on the slot to leave it; returns how many were told. */
  evict(slot: number): number {
    const set = this.bySlot.get(slot);
    if (!set) return 0;
    // A copy: a stream may leave the set while it is told.
    const streams = [...set];
    for (const s of streams) s.evict();
    return streams.length;
  }
}
