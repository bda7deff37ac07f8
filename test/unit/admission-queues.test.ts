import { describe, expect, test } from "bun:test";
import { AdmissionQueues, type BandSpec } from "../../src/admission/admission-queues.ts";
import { DrainRate } from "../../src/admission/drain-rate.ts";
import { BandQueue, type Ticket } from "../../src/admission/flow-queues.ts";
import { seeded } from "../helpers/scheduling.ts";

let nextId = 1;
function ticket(tenant: string, over: Partial<Ticket> = {}): Ticket {
  return { id: nextId++, band: 0, tenant, pool: "p", model: "m", estTokens: 100, enqueuedAt: 0, ...over };
}

function rr(limit = 10_000): BandQueue {
  return new BandQueue({ fairness: "round-robin", quantumTokens: 1000, limit });
}

function drr(quantumTokens = 1000, limit = 10_000): BandQueue {
  return new BandQueue({ fairness: "token-deficit", quantumTokens, limit });
}

function drain(q: BandQueue): Ticket[] {
  const out: Ticket[] = [];
  for (let t = q.take(); t !== undefined; t = q.take()) out.push(t);
  return out;
}

describe("BandQueue round-robin", () => {
  test("tenants take turns in order of arrival: A1,B1,C1,A2,B2,…", () => {
    const q = rr();
    for (let i = 0; i < 3; i++) for (const tenant of ["A", "B", "C"]) q.enqueue(ticket(tenant));
    q.enqueue(ticket("A"));
    expect(
      drain(q)
        .map((t) => t.tenant)
        .join(""),
    ).toBe("ABCABCABCA");
  });

  test("a tenant with 300 queued takes one slot per rotation; a late small tenant is served within a few turns", () => {
    const q = rr();
    for (let i = 0; i < 300; i++) q.enqueue(ticket("A"));
    const order: string[] = [];
    // B arrives after A's backlog, one ticket at a time, while A is being served.
    for (let step = 0; step < 60; step++) {
      if (step === 10 || step === 11 || step === 30) q.enqueue(ticket("B"));
      const t = q.take();
      if (t !== undefined) order.push(t.tenant);
    }
    const bAt = order.flatMap((tenant, i) => (tenant === "B" ? [i] : []));
    expect(bAt).toHaveLength(3);
    const tenants = 2;
    expect(bAt[0]! - 10).toBeLessThanOrEqual(2 * tenants);
    expect(bAt[1]! - bAt[0]!).toBeLessThanOrEqual(2 * tenants);
    expect(bAt[2]! - 30).toBeLessThanOrEqual(2 * tenants);
    // A is not starved either: between B's two consecutive tickets A still gets a turn.
    expect(order.slice(bAt[0]!, bAt[1]!)).toContain("A");
    expect(order.filter((x) => x === "A").length).toBe(57);
  });

  test("a tenant that empties leaves the rotation and rejoins at the end", () => {
    const q = rr();
    q.enqueue(ticket("A"));
    q.enqueue(ticket("B"));
    q.enqueue(ticket("C"));
    q.enqueue(ticket("C"));
    expect(q.take()?.tenant).toBe("A"); // A empties
    q.enqueue(ticket("A")); // rejoins after C
    expect(
      drain(q)
        .map((t) => t.tenant)
        .join(""),
    ).toBe("BCAC");
  });

  test("enqueue refuses at the limit", () => {
    const q = rr(2);
    expect(q.enqueue(ticket("A"))).toBe(true);
    expect(q.enqueue(ticket("B"))).toBe(true);
    expect(q.enqueue(ticket("C"))).toBe(false);
    expect(q.size).toBe(2);
  });
});

describe("BandQueue token-deficit", () => {
  test("big and small tenants get roughly equal tokens while both are backlogged", () => {
    const q = drr(1000);
    for (let i = 0; i < 200; i++) q.enqueue(ticket("A", { estTokens: 4000 }));
    for (let i = 0; i < 5000; i++) q.enqueue(ticket("B", { estTokens: 100 }));
    const served = new Map<string, number>([
      ["A", 0],
      ["B", 0],
    ]);
    for (let i = 0; i < 2000; i++) {
      const t = q.take()!;
      served.set(t.tenant, served.get(t.tenant)! + t.estTokens);
    }
    const a = served.get("A")!;
    const b = served.get("B")!;
    expect(q.depthByTenant().get("A")).toBeGreaterThan(0); // both still backlogged
    expect(q.depthByTenant().get("B")).toBeGreaterThan(0);
    expect(a).toBeGreaterThan(0);
    expect(Math.abs(a - b) / Math.max(a, b)).toBeLessThan(0.2);
  });

  test("round-robin by count, by contrast, gives the big tenant 40x the tokens", () => {
    const q = rr();
    for (let i = 0; i < 100; i++) q.enqueue(ticket("A", { estTokens: 4000 }));
    for (let i = 0; i < 100; i++) q.enqueue(ticket("B", { estTokens: 100 }));
    const tokens = { A: 0, B: 0 };
    for (let i = 0; i < 100; i++) {
      const t = q.take()!;
      tokens[t.tenant as "A" | "B"] += t.estTokens;
    }
    expect(tokens.A).toBe(40 * tokens.B);
  });

  test("a ticket bigger than any quantum is served eventually", () => {
    const q = drr(100);
    q.enqueue(ticket("big", { estTokens: 10_000 }));
    for (let i = 0; i < 500; i++) q.enqueue(ticket("small", { estTokens: 100 }));
    const order = drain(q).map((t) => t.tenant);
    const at = order.indexOf("big");
    expect(at).toBeGreaterThanOrEqual(0);
    // It waits ~100 rounds of one 100-token ticket each, not for the whole small backlog.
    expect(at).toBeLessThan(150);
    // Alone, it is served at once (the deficit is reached without spinning).
    const solo = drr(1);
    solo.enqueue(ticket("big", { estTokens: 1e9 }));
    expect(solo.take()?.tenant).toBe("big");
  });

  test("a tenant serves several small tickets in one turn, then passes it", () => {
    const q = drr(300);
    for (let i = 0; i < 4; i++) q.enqueue(ticket("A", { estTokens: 100 }));
    for (let i = 0; i < 4; i++) q.enqueue(ticket("B", { estTokens: 100 }));
    expect(
      drain(q)
        .map((t) => t.tenant)
        .join(""),
    ).toBe("AAABBBAB");
  });

  test("a tenant that empties forfeits its deficit", () => {
    const q = drr(1000);
    q.enqueue(ticket("A", { estTokens: 10 })); // A banks 990 when served
    q.enqueue(ticket("B", { estTokens: 1500 }));
    expect(q.take()?.tenant).toBe("A");
    q.enqueue(ticket("A", { estTokens: 1900 })); // would fit 990+1000 if the deficit had been kept
    // B: 1000 (round 0) → 2000 (round 1) serves; A: 1000, 2000 → serves after B.
    expect(
      drain(q)
        .map((t) => t.tenant)
        .join(""),
    ).toBe("BA");
  });

  test("peek() is exactly what take() takes, over random operations (seeded)", () => {
    for (const fairness of ["token-deficit", "round-robin"] as const) {
      const rand = seeded(fairness === "round-robin" ? 7 : 42);
      const q = new BandQueue({ fairness, quantumTokens: 500, limit: 200 });
      const queued: number[] = [];
      let now = 0;
      let taken = 0;
      for (let step = 0; step < 5000; step++) {
        now += 1;
        const r = rand();
        if (r < 0.45) {
          const t = ticket(`t${Math.floor(rand() * 6)}`, { estTokens: Math.floor(rand() * 3000), enqueuedAt: now });
          if (q.enqueue(t)) queued.push(t.id);
        } else if (r < 0.85) {
          const peeked = q.peek();
          const again = q.peek();
          const t = q.take();
          expect(again).toBe(peeked);
          expect(t).toBe(peeked);
          if (t !== undefined) {
            taken += 1;
            queued.splice(queued.indexOf(t.id), 1);
          }
        } else if (r < 0.95 && queued.length > 0) {
          const id = queued[Math.floor(rand() * queued.length)]!;
          expect(q.remove(id)).toBe(true);
          queued.splice(queued.indexOf(id), 1);
        } else {
          for (const t of q.expire(now, 400)) queued.splice(queued.indexOf(t.id), 1);
        }
        expect(q.size).toBe(queued.length);
      }
      expect(taken).toBeGreaterThan(1000);
    }
  });
});

/** Step-by-step deficit round-robin, the textbook loop, to check BandQueue's closed form against. */
class ReferenceDrr {
  private rotation: string[] = [];
  private queues = new Map<string, Ticket[]>();
  private deficit = new Map<string, number>();
  private turnOpen = false;
  constructor(private readonly quantum: number) {}
  enqueue(t: Ticket): void {
    const q = this.queues.get(t.tenant);
    if (q !== undefined && q.length > 0) q.push(t);
    else {
      this.queues.set(t.tenant, [t]);
      this.deficit.set(t.tenant, 0);
      this.rotation.push(t.tenant);
    }
  }
  take(): Ticket | undefined {
    for (;;) {
      const tenant = this.rotation[0];
      if (tenant === undefined) return undefined;
      if (!this.turnOpen) {
        this.deficit.set(tenant, this.deficit.get(tenant)! + this.quantum);
        this.turnOpen = true;
      }
      const q = this.queues.get(tenant)!;
      const head = q[0]!;
      if (head.estTokens <= this.deficit.get(tenant)!) {
        this.deficit.set(tenant, this.deficit.get(tenant)! - head.estTokens);
        this.removeAt(tenant, 0);
        return head;
      }
      this.rotation.push(this.rotation.shift()!);
      this.turnOpen = false;
    }
  }
  remove(id: number): void {
    for (const [tenant, q] of this.queues) {
      const i = q.findIndex((t) => t.id === id);
      if (i >= 0) return this.removeAt(tenant, i);
    }
  }
  private removeAt(tenant: string, i: number): void {
    const q = this.queues.get(tenant)!;
    q.splice(i, 1);
    if (q.length > 0) return;
    if (this.rotation[0] === tenant) this.turnOpen = false;
    this.rotation = this.rotation.filter((x) => x !== tenant);
    this.deficit.set(tenant, 0);
  }
}

describe("BandQueue token-deficit matches the textbook loop", () => {
  test("same service order over random enqueues, takes and removals (seeded)", () => {
    for (const seed of [1, 2, 3]) {
      const rand = seeded(seed);
      const quantum = 300 + Math.floor(rand() * 700);
      const q = drr(quantum);
      const ref = new ReferenceDrr(quantum);
      const queued: number[] = [];
      for (let step = 0; step < 4000; step++) {
        const r = rand();
        if (r < 0.5) {
          const t = ticket(`t${Math.floor(rand() * 5)}`, { estTokens: Math.floor(rand() * 4 * quantum) });
          q.enqueue(t);
          ref.enqueue(t);
          queued.push(t.id);
        } else if (r < 0.9) {
          const t = q.take();
          expect(t?.id).toBe(ref.take()?.id);
          if (t !== undefined) queued.splice(queued.indexOf(t.id), 1);
        } else if (queued.length > 0) {
          const id = queued.splice(Math.floor(rand() * queued.length), 1)[0]!;
          q.remove(id);
          ref.remove(id);
        }
      }
    }
  });
});

describe("BandQueue remove and expire", () => {
  test("a removed ticket is gone from size and never returned; an unknown id is false", () => {
    for (const q of [rr(), drr()]) {
      const a1 = ticket("A");
      const a2 = ticket("A");
      const b1 = ticket("B");
      for (const t of [a1, a2, b1]) q.enqueue(t);
      expect(q.remove(a2.id)).toBe(true);
      expect(q.size).toBe(2);
      expect(q.remove(a2.id)).toBe(false);
      expect(q.remove(999_999)).toBe(false);
      expect(drain(q).map((t) => t.id)).toEqual([a1.id, b1.id]);
      // Removing a tenant's last ticket takes it out of the rotation.
      const c = ticket("C");
      q.enqueue(c);
      q.enqueue(ticket("D"));
      q.remove(c.id);
      expect([...q.depthByTenant().keys()]).toEqual(["D"]);
      expect(q.take()?.tenant).toBe("D");
      expect(q.take()).toBeUndefined();
    }
  });

  test("expire returns only the old ones, oldest first, and updates sizes", () => {
    const q = drr();
    const tickets = [
      ticket("A", { enqueuedAt: 300 }),
      ticket("B", { enqueuedAt: 100 }),
      ticket("A", { enqueuedAt: 900 }),
      ticket("C", { enqueuedAt: 200 }),
      ticket("B", { enqueuedAt: 950 }),
    ];
    for (const t of tickets) q.enqueue(t);
    const gone = q.expire(1300, 1000); // enqueuedAt <= 300
    expect(gone.map((t) => t.enqueuedAt)).toEqual([100, 200, 300]);
    expect(q.size).toBe(2);
    expect(q.depthByTenant()).toEqual(
      new Map([
        ["A", 1],
        ["B", 1],
      ]),
    );
    expect(q.expire(1300, 1000)).toEqual([]);
    expect(
      drain(q)
        .map((t) => t.enqueuedAt)
        .sort(),
    ).toEqual([900, 950]);
  });
});

const BANDS: BandSpec[] = [
  { name: "interactive", ceiling: 0.9, queueLimit: 3, ttlMs: 1000 },
  { name: "standard", ceiling: 0.7, queueLimit: 3, ttlMs: 5000 },
  { name: "batch", ceiling: 0.5, queueLimit: 3, ttlMs: 60_000 },
];

function queues(): AdmissionQueues {
  return new AdmissionQueues(BANDS, { fairness: "round-robin", quantumTokens: 1000 });
}

describe("AdmissionQueues", () => {
  test("strict priority: band 0 drains before band 1 before band 2", () => {
    const a = queues();
    a.enqueue(ticket("T", { band: 2 }));
    a.enqueue(ticket("T", { band: 1 }));
    a.enqueue(ticket("T", { band: 0 }));
    a.enqueue(ticket("U", { band: 1 }));
    const bands: number[] = [];
    for (let t = a.next(() => true); t !== undefined; t = a.next(() => true)) bands.push(t.band);
    expect(bands).toEqual([0, 1, 1, 2]);
    expect(a.total).toBe(0);
  });

  test("a blocked higher band for pool p blocks lower bands for p but not for q", () => {
    const a = queues();
    const high = ticket("T", { band: 0, pool: "p" });
    const lowP = ticket("T", { band: 1, pool: "p" });
    const lowQ = ticket("T", { band: 1, pool: "q" });
    for (const t of [lowP, high, lowQ]) a.enqueue(t);
    // mayFlow would admit band 1 for p (were it asked) but refuses band 0 for p.
    const asked: number[] = [];
    const mayFlow = (t: Ticket): boolean => {
      asked.push(t.id);
      return !(t.pool === "p" && t.band === 0);
    };
    expect(a.next(mayFlow)?.id).toBe(lowQ.id);
    expect(a.next(mayFlow)).toBeUndefined();
    expect(asked).not.toContain(lowP.id);
    // Once band 0 may flow, p drains in priority order.
    expect(a.next(() => true)?.id).toBe(high.id);
    expect(a.next(() => true)?.id).toBe(lowP.id);
  });

  test("a blocked head does not let the same band's later tickets for that pool skip ahead", () => {
    const a = queues();
    const first = ticket("A", { band: 0, model: "big" });
    const second = ticket("B", { band: 0, model: "small" });
    a.enqueue(first);
    a.enqueue(second);
    expect(a.next((t) => t.model !== "big")).toBeUndefined();
    expect(a.depth(0)).toBe(2);
  });

  test("enqueue returns full at the band's limit, counted over all pools", () => {
    const a = queues();
    expect(a.enqueue(ticket("A", { band: 1, pool: "p" }))).toBe("queued");
    expect(a.enqueue(ticket("A", { band: 1, pool: "q" }))).toBe("queued");
    expect(a.enqueue(ticket("B", { band: 1, pool: "r" }))).toBe("queued");
    expect(a.enqueue(ticket("C", { band: 1, pool: "p" }))).toBe("full");
    expect(a.enqueue(ticket("C", { band: 0, pool: "p" }))).toBe("queued"); // other bands unaffected
    expect(a.depth(1)).toBe(3);
    expect(() => a.enqueue(ticket("C", { band: 3 }))).toThrow(RangeError);
  });

  test("cancel removes the ticket and frees its slot", () => {
    const a = queues();
    const ts = [ticket("A", { band: 2 }), ticket("B", { band: 2 }), ticket("C", { band: 2 })];
    for (const t of ts) a.enqueue(t);
    expect(a.cancel(ts[1]!.id)).toBe(ts[1]);
    expect(a.cancel(ts[1]!.id)).toBeUndefined();
    expect(a.depth(2)).toBe(2);
    expect(a.enqueue(ticket("D", { band: 2 }))).toBe("queued");
    const out: number[] = [];
    for (let t = a.next(() => true); t !== undefined; t = a.next(() => true)) out.push(t.id);
    expect(out).not.toContain(ts[1]!.id);
    expect(out).toHaveLength(3);
  });

  test("expire uses each band's own TTL", () => {
    const a = queues();
    const i0 = ticket("A", { band: 0, enqueuedAt: 0 });
    const s0 = ticket("A", { band: 1, enqueuedAt: 0 });
    const i1 = ticket("A", { band: 0, enqueuedAt: 500 });
    const b0 = ticket("A", { band: 2, enqueuedAt: 0 });
    for (const t of [i0, s0, i1, b0]) a.enqueue(t);
    expect(a.expire(1000).map((t) => t.id)).toEqual([i0.id]);
    expect(a.expire(5000).map((t) => t.id)).toEqual([s0.id, i1.id]);
    expect(a.total).toBe(1);
    expect(a.depths()).toEqual([
      { band: "interactive", depth: 0 },
      { band: "standard", depth: 0 },
      { band: "batch", depth: 1 },
    ]);
  });

  test("token-deficit fairness applies inside each (band, pool)", () => {
    const a = new AdmissionQueues(
      BANDS.map((b) => ({ ...b, queueLimit: 100 })),
      { fairness: "token-deficit", quantumTokens: 300 },
    );
    for (let i = 0; i < 4; i++) a.enqueue(ticket("A", { estTokens: 100 }));
    for (let i = 0; i < 4; i++) a.enqueue(ticket("B", { estTokens: 100 }));
    const order: string[] = [];
    for (let t = a.next(() => true); t !== undefined; t = a.next(() => true)) order.push(t.tenant);
    expect(order.join("")).toBe("AAABBBAB");
  });
});

describe("DrainRate", () => {
  test("a steady 100/s measures ~100/s, and 200 queued drain in ~2 s", () => {
    const r = new DrainRate();
    for (let now = 0; now <= 20_000; now += 10) r.record(now);
    expect(r.perSecond(20_000)).toBeGreaterThan(95);
    expect(r.perSecond(20_000)).toBeLessThan(105);
    expect(r.retryAfterSeconds(20_000, 200)).toBe(2);
  });

  test("early estimate is already close (bias-corrected), and batches count", () => {
    const r = new DrainRate();
    for (let now = 0; now <= 2000; now += 100) r.record(now, 10);
    expect(r.perSecond(2000)).toBeGreaterThan(90);
    expect(r.perSecond(2000)).toBeLessThan(115);
  });

  test("the rate follows a change with the half-life and decays when draining stops", () => {
    const r = new DrainRate(1000);
    for (let now = 0; now <= 10_000; now += 10) r.record(now);
    for (let now = 10_020; now <= 20_000; now += 20) r.record(now);
    expect(r.perSecond(20_000)).toBeGreaterThan(45);
    expect(r.perSecond(20_000)).toBeLessThan(55);
    const after = r.perSecond(21_000);
    expect(after).toBeLessThan(r.perSecond(20_000) * 0.55);
    expect(after).toBeGreaterThan(r.perSecond(20_000) * 0.45);
  });

  test("nothing drained yet: rate 0, Retry-After the default; capped at 60 s; at least 1 s", () => {
    const r = new DrainRate();
    expect(r.perSecond(1000)).toBe(0);
    expect(r.retryAfterSeconds(1000, 500)).toBe(1);
    for (let now = 0; now <= 10_000; now += 1000) r.record(now); // ~1/s
    expect(r.retryAfterSeconds(10_000, 10_000)).toBe(60);
    expect(r.retryAfterSeconds(10_000, 0)).toBe(1);
  });
});
