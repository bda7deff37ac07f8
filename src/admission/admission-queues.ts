/** Admission's bounded priority bands: one fair BandQueue per (band, pool), served in strict band priority per pool. */
import { BandQueue, type Fairness, type Ticket } from "./flow-queues.ts";

export interface BandSpec {
  name: string;
  ceiling: number;
  queueLimit: number;
  ttlMs: number;
}

interface Band {
  spec: BandSpec;
  /** Pool → that pool's queue in this band; created on demand, deleted when empty. */
  pools: Map<string, BandQueue>;
  /** Tickets in this band over all pools (queueLimit bounds the band, not each pool). */
  depth: number;
}

export class AdmissionQueues {
  private readonly bands: Band[];
  private readonly fairness: Fairness;
  private readonly quantumTokens: number;
  /** id → the ticket, so cancel() goes straight to its queue. */
  private readonly byId = new Map<number, Ticket>();

  constructor(bands: readonly BandSpec[], opts: { fairness: Fairness; quantumTokens: number }) {
    if (bands.length === 0) throw new RangeError("at least one admission band is required");
    if (!(opts.quantumTokens > 0)) throw new RangeError(`quantumTokens must be > 0, got ${opts.quantumTokens}`);
    this.bands = bands.map((spec) => ({ spec, pools: new Map<string, BandQueue>(), depth: 0 }));
    this.fairness = opts.fairness;
    this.quantumTokens = opts.quantumTokens;
  }

  /** "queued", or "full" when the ticket's band is at its queueLimit. */
  enqueue(t: Ticket): "queued" | "full" {
    const band = this.band(t.band);
    if (band.depth >= band.spec.queueLimit) return "full";
    if (this.byId.has(t.id)) throw new Error(`ticket ${t.id} is already queued`);
    let q = band.pools.get(t.pool);
    if (q === undefined) {
      // The band-wide count enforces queueLimit; the per-pool queue needs no bound of its own.
      q = new BandQueue({ fairness: this.fairness, quantumTokens: this.quantumTokens, limit: Number.POSITIVE_INFINITY });
      band.pools.set(t.pool, q);
    }
    q.enqueue(t);
    band.depth += 1;
    this.byId.set(t.id, t);
    return "queued";
  }

  /** The removed ticket, if it was queued (the client went away). */
  cancel(id: number): Ticket | undefined {
    const t = this.byId.get(id);
    if (t === undefined) return undefined;
    const band = this.band(t.band);
    const q = band.pools.get(t.pool);
    if (q === undefined || !q.remove(id)) return undefined;
    this.forget(band, t.pool, q, t);
    return t;
  }

  /** Expired tickets of every band (each band's own ttlMs), oldest first. */
  expire(now: number): Ticket[] {
    const out: Ticket[] = [];
    for (const band of this.bands) {
      for (const [pool, q] of band.pools) {
        for (const t of q.expire(now, band.spec.ttlMs)) {
          this.forget(band, pool, q, t);
          out.push(t);
        }
      }
    }
    out.sort((a, b) => a.enqueuedAt - b.enqueuedAt || a.id - b.id);
    return out;
  }

  /**
   * Strict priority per pool. Bands are walked from 0; each pool's next ticket in a band is
   * offered to mayFlow. A refusal blocks that pool for the rest of this call, so a lower band
   * never overtakes a higher band's waiting ticket for the same pool (nor does a later ticket
   * in the same band jump its fair turn); other pools carry on independently.
   */
  next(mayFlow: (t: Ticket) => boolean): Ticket | undefined {
    const blocked = new Set<string>();
    for (const band of this.bands) {
      for (const [pool, q] of band.pools) {
        if (blocked.has(pool)) continue;
        const head = q.peek();
        if (head === undefined) continue;
        if (!mayFlow(head)) {
          blocked.add(pool);
          continue;
        }
        const t = q.take();
        if (t === undefined) continue;
        this.forget(band, pool, q, t);
        return t;
      }
    }
    return undefined;
  }

  depth(band: number): number {
    return this.band(band).depth;
  }

  get total(): number {
    return this.byId.size;
  }

  /** Depth per band name (for metrics). */
  depths(): { band: string; depth: number }[] {
    return this.bands.map((b) => ({ band: b.spec.name, depth: b.depth }));
  }

  /** Depth per pool of one band (for metrics and tests). */
  poolDepths(band: number): Map<string, number> {
    const out = new Map<string, number>();
    for (const [pool, q] of this.band(band).pools) out.set(pool, q.size);
    return out;
  }

  private band(index: number): Band {
    const band = this.bands[index];
    if (band === undefined) throw new RangeError(`band ${index} out of range 0..${this.bands.length - 1}`);
    return band;
  }

  /** Bookkeeping after a ticket left queue q; an emptied pool queue is dropped (it holds no state). */
  private forget(band: Band, pool: string, q: BandQueue, t: Ticket): void {
    this.byId.delete(t.id);
    band.depth -= 1;
    if (q.size === 0) band.pools.delete(pool);
  }
}
