/**
 * A peer's topic subscriptions: byte prefixes, counted as libzmq counts them
 * (two SUBSCRIBEs to one topic need two CANCELs), matched against a
 * message's first frame (RFC 29/PUBSUB). Pure.
 */

function key(topic: Uint8Array): string {
  return Buffer.from(topic).toString("latin1");
}

export class Subscriptions {
  private readonly counts = new Map<string, { topic: Uint8Array; count: number }>();

  add(topic: Uint8Array): void {
    const k = key(topic);
    const entry = this.counts.get(k);
    if (entry) entry.count++;
    else this.counts.set(k, { topic: topic.slice(), count: 1 });
  }

  /** Remove one subscription to `topic`; a CANCEL for a topic never subscribed is ignored. */
  remove(topic: Uint8Array): void {
    const k = key(topic);
    const entry = this.counts.get(k);
    if (!entry) return;
    if (--entry.count === 0) this.counts.delete(k);
  }

  get size(): number {
    return this.counts.size;
  }

  /** Some subscription is a prefix of `first` (the empty subscription matches everything). */
  matches(first: Uint8Array): boolean {
    for (const { topic } of this.counts.values()) {
      if (topic.length > first.length) continue;
      let i = 0;
      while (i < topic.length && topic[i] === first[i]) i++;
      if (i === topic.length) return true;
    }
    return false;
  }

  topics(): Uint8Array[] {
    return [...this.counts.values()].map((e) => e.topic);
  }
}
