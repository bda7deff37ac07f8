/** One admission band's queue: per-tenant FIFO sub-queues served in turn (round-robin or deficit round-robin). */

export interface Ticket {
  /** Unique per request. */
  id: number;
  /** Index into the bands (0 = highest priority). */
  band: number;
  tenant: string;
  pool: string;
  model: string;
  /** Estimated prompt+completion tokens (the cost token-deficit fairness charges). */
  estTokens: number;
  /** Milliseconds, on the caller's clock. */
  enqueuedAt: number;
}

export type Fairness = "round-robin" | "token-deficit";

/** A tenant in the rotation: a node of a circular doubly-linked list, so joining, leaving and turning are O(1). */
class TenantNode {
  /** FIFO in insertion order; a Map so a cancelled ticket leaves in O(1). */
  readonly tickets = new Map<number, Ticket>();
  /** Deficit round-robin credit in tokens; 0 whenever the tenant is not in the rotation. */
  deficit = 0;
  prev: TenantNode = this;
  next: TenantNode = this;
  constructor(readonly tenant: string) {}
}

/** The DRR decision peek() computed: serve `node`'s head after `rounds` full extra rounds. */
interface Decision {
  node: TenantNode;
  rounds: number;
}

function headOf(node: TenantNode): Ticket {
  const first = node.tickets.values().next();
  if (first.done === true) throw new Error("tenant in rotation with no tickets");
  return first.value;
}

function cost(t: Ticket): number {
  return Number.isFinite(t.estTokens) && t.estTokens > 0 ? t.estTokens : 0;
}

export class BandQueue {
  private readonly fairness: Fairness;
  private readonly quantum: number;
  private readonly limit: number;
  /** Only tenants with something queued are here; all of them are in the rotation. */
  private readonly tenants = new Map<string, TenantNode>();
  /** id → tenant node, so remove() never scans other tenants. */
  private readonly byId = new Map<number, TenantNode>();
  /** Whose turn it is; undefined when empty. The rotation's end is head.prev. */
  private head: TenantNode | undefined;
  /** DRR: the head tenant already received its quantum for the current turn. */
  private turnOpen = false;
  /** DRR decision cached between mutations, so peek() then take() costs one walk. */
  private decision: Decision | undefined;

  constructor(opts: { fairness: Fairness; quantumTokens: number; limit: number }) {
    if (!(opts.quantumTokens > 0)) throw new RangeError(`quantumTokens must be > 0, got ${opts.quantumTokens}`);
    if (!(opts.limit >= 0)) throw new RangeError(`limit must be >= 0, got ${opts.limit}`);
    this.fairness = opts.fairness;
    this.quantum = opts.quantumTokens;
    this.limit = opts.limit;
  }

  get size(): number {
    return this.byId.size;
  }

  /** false when the band is full (size >= limit). */
  enqueue(t: Ticket): boolean {
    if (this.byId.size >= this.limit) return false;
    if (this.byId.has(t.id)) throw new Error(`ticket ${t.id} is already queued`);
    let node = this.tenants.get(t.tenant);
    if (node === undefined) {
      node = this.join(t.tenant);
    }
    node.tickets.set(t.id, t);
    this.byId.set(t.id, node);
    this.decision = undefined;
    return true;
  }

  /** The next ticket by fairness without removing it (undefined when empty). */
  peek(): Ticket | undefined {
    if (this.head === undefined) return undefined;
    if (this.fairness === "round-robin") return headOf(this.head);
    return headOf(this.decide().node);
  }

  /** Remove and return what peek() returned, advancing the rotation / charging the deficit. */
  take(): Ticket | undefined {
    const head = this.head;
    if (head === undefined) return undefined;
    if (this.fairness === "round-robin") {
      const t = headOf(head);
      this.head = head.next; // served one: the turn passes, whether or not the tenant leaves
      this.drop(head, t);
      return t;
    }
    const { node, rounds } = this.decide();
    this.credit(node, rounds);
    this.head = node;
    this.turnOpen = true;
    const t = headOf(node);
    node.deficit -= cost(t);
    this.drop(node, t);
    return t;
  }

  /** Remove a specific ticket (the client went away). true if it was queued. */
  remove(id: number): boolean {
    const node = this.byId.get(id);
    if (node === undefined) return false;
    const t = node.tickets.get(id);
    if (t === undefined) return false;
    this.drop(node, t);
    return true;
  }

  /** Remove and return every ticket with enqueuedAt + ttlMs <= now, oldest first. */
  expire(now: number, ttlMs: number): Ticket[] {
    const old: Ticket[] = [];
    // Scans every ticket rather than each tenant's front: callers may enqueue with
    // non-monotonic clocks, and the queue is bounded by its limit.
    for (const node of this.tenants.values()) {
      for (const t of node.tickets.values()) if (t.enqueuedAt + ttlMs <= now) old.push(t);
    }
    old.sort((a, b) => a.enqueuedAt - b.enqueuedAt || a.id - b.id);
    for (const t of old) this.remove(t.id);
    return old;
  }

  /** Tickets per tenant (for metrics and tests). */
  depthByTenant(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [tenant, node] of this.tenants) out.set(tenant, node.tickets.size);
    return out;
  }

  /** Add a tenant at the end of the rotation (just before the head). */
  private join(tenant: string): TenantNode {
    const node = new TenantNode(tenant);
    const head = this.head;
    if (head === undefined) {
      this.head = node;
      this.turnOpen = false;
    } else {
      node.prev = head.prev;
      node.next = head;
      head.prev.next = node;
      head.prev = node;
    }
    this.tenants.set(tenant, node);
    return node;
  }

  /** Remove one ticket; a tenant left with none leaves the rotation and forfeits its deficit. */
  private drop(node: TenantNode, t: Ticket): void {
    node.tickets.delete(t.id);
    this.byId.delete(t.id);
    this.decision = undefined;
    if (node.tickets.size > 0) return;
    node.deficit = 0;
    this.tenants.delete(node.tenant);
    if (node.next === node) {
      this.head = undefined;
      this.turnOpen = false;
      return;
    }
    node.prev.next = node.next;
    node.next.prev = node.prev;
    if (this.head === node) {
      this.head = node.next;
      this.turnOpen = false; // the next tenant's turn starts fresh
    }
  }

  /**
   * Deficit round-robin (Shreedhar & Varghese, 1996) without side effects. Visiting from
   * the head, the tenant at position j has received base_j + r quanta by its visit in round r
   * (base_j = 0 for a head whose turn is already open, else 1); its head ticket is served in
   * the first round where deficit + quanta covers its cost. The winner is the least
   * (round, position) — computed in closed form, so a ticket far larger than the quantum
   * costs no more than a small one.
   */
  private decide(): Decision {
    if (this.decision !== undefined) return this.decision;
    const start = this.head;
    if (start === undefined) throw new Error("decide() on an empty band");
    let best: Decision | undefined;
    let node = start;
    do {
      const base = node === start && this.turnOpen ? 0 : 1;
      const missing = cost(headOf(node)) - node.deficit;
      const rounds = Math.max(0, Math.ceil(missing / this.quantum) - base);
      // Strictly less: on a tie the earlier position (visited first) wins.
      if (best === undefined || rounds < best.rounds) best = { node, rounds };
      node = node.next;
    } while (node !== start && best.rounds > 0);
    this.decision = best;
    return best;
  }

  /** Apply the quanta every tenant received on the way to the decided one (see decide()). */
  private credit(target: TenantNode, rounds: number): void {
    const start = this.head;
    if (start === undefined) return;
    let node = start;
    let reachedTarget = false;
    do {
      const base = node === start && this.turnOpen ? 0 : 1;
      // Up to and including the target: visited in rounds 0..rounds; after it: in 0..rounds-1.
      const quanta = reachedTarget ? rounds : base + rounds;
      node.deficit += quanta * this.quantum;
      if (node === target) reachedTarget = true;
      node = node.next;
    } while (node !== start);
  }
}
