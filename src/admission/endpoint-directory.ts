/**
 * Which endpoint occupies which slot of the shared table, which pool it is in
 * and which models it serves, with the per-model lookups a decision needs. The
 * main thread owns the truth; the scheduler worker keeps an identical copy
 * fed by messages, so both threads decide over the same data.
 */
import type { EndpointDescriptor } from "../protocol/scheduler-messages.ts";

export class EndpointDirectory {
  private readonly bySlot: (EndpointDescriptor | undefined)[] = [];
  /** model → the active endpoints serving it (rebuilt lazily after a change). */
  private byModel: Map<string, EndpointDescriptor[]> | undefined;
  private poolByModel: Map<string, number | undefined> | undefined;

  constructor(initial: readonly EndpointDescriptor[] = []) {
    for (const d of initial) this.set(d.index, d);
  }

  /** Place (or, with undefined, remove) the endpoint of a slot. */
  set(slot: number, d: EndpointDescriptor | undefined): void {
    this.bySlot[slot] = d === undefined ? undefined : { ...d, models: [...d.models] };
    this.byModel = undefined;
    this.poolByModel = undefined;
  }

  setModels(slot: number, models: readonly string[]): void {
    const d = this.bySlot[slot];
    if (!d) return;
    d.models = [...models];
    this.byModel = undefined;
    this.poolByModel = undefined;
  }

  get(slot: number): EndpointDescriptor | undefined {
    return this.bySlot[slot];
  }

  /** Every active endpoint, in slot order. */
  all(): EndpointDescriptor[] {
    return this.bySlot.filter((d): d is EndpointDescriptor => d !== undefined);
  }

  /** Active endpoints in a pool. */
  inPool(pool: number): EndpointDescriptor[] {
    return this.all().filter((d) => d.pool === pool);
  }

  /** The active endpoints that serve `model` (empty when none). */
  serving(model: string): readonly EndpointDescriptor[] {
    if (!this.byModel) {
      const m = new Map<string, EndpointDescriptor[]>();
      for (const d of this.bySlot) {
        if (!d) continue;
        for (const name of d.models) {
          let list = m.get(name);
          if (!list) m.set(name, (list = []));
          list.push(d);
        }
      }
      this.byModel = m;
    }
    return this.byModel.get(model) ?? NONE;
  }

  /** The pool a model is admitted against: the one holding most of its endpoints (lowest index on a tie). */
  poolOf(model: string): number | undefined {
    this.poolByModel ??= new Map();
    const cached = this.poolByModel.get(model);
    if (cached !== undefined || this.poolByModel.has(model)) return cached;
    const counts = new Map<number, number>();
    for (const d of this.serving(model)) counts.set(d.pool, (counts.get(d.pool) ?? 0) + 1);
    let best: number | undefined;
    let bestN = 0;
    for (const [pool, n] of counts) {
      if (n > bestN || (n === bestN && best !== undefined && pool < best)) {
        best = pool;
        bestN = n;
      }
    }
    this.poolByModel.set(model, best);
    return best;
  }
}

const NONE: readonly EndpointDescriptor[] = Object.freeze([]);
