/**
 * Admission in the scheduler worker: the slow path, for requests the main
 * thread could not admit by itself. A request flows at once when nothing waits
 * ahead of it for its pool and its band's limit has room; otherwise it waits
 * in its band's bounded queue (tenants taking turns) until capacity frees, its
 * TTL expires (504) or its client leaves. Dispatch across bands is strict
 * priority per pool. The controller also learns each endpoint's batch
 * capacity and publishes, per pool, the flow limit of every band and what
 * waits in it: what the main thread's fast path decides on.
 */
import type { Config } from "../config/types.ts";
import type { FromScheduler, ToScheduler } from "../protocol/scheduler-messages.ts";
import { type AdmissionStatsTable, type EndpointTable, F, I, type PoolTable, UNLIMITED } from "../shared/endpoint-table.ts";
import { scaleLimit } from "../shared/pool-shares.ts";
import { AdmissionQueues, type BandSpec } from "./admission-queues.ts";
import type { EndpointChooser, RoutingKeys } from "./chooser.ts";
import { DrainRate } from "./drain-rate.ts";
import type { EndpointDirectory } from "./endpoint-directory.ts";
import type { Ticket } from "./flow-queues.ts";
import { bandLimits, CapacityLearner, type PoolMember, poolSaturation } from "./pool-saturation.ts";

type AdmitMessage = Extract<ToScheduler, { type: "admit" }>;
type Outcome = Extract<FromScheduler, { type: "grant" | "reject" }>;

/** Buckets of the reserve window: each holds every band's peak over one tenth of it. */
const RESERVE_BUCKETS = 10;
/** What a band leaves the bands above it: their recent peak × (1 + margin) + a few places. */
const RESERVE_MARGIN = 0.25;
const RESERVE_MIN_PLACES = 1;

interface Waiting {
  keys: RoutingKeys;
  poolIndex: number;
  adapter: number | undefined;
}

const ZEROES: readonly number[] = [];

/** What a queued request is scored on: its prefix hashes, and its token-block keys when it was tokenized. */
function routingKeys(msg: AdmitMessage): RoutingKeys {
  return {
    prefixHashes: msg.prefixHashes,
    ...(msg.tokenBlockKeys !== undefined ? { tokenBlockKeys: msg.tokenBlockKeys } : {}),
    ...(msg.promptTokens !== undefined ? { promptTokens: msg.promptTokens } : {}),
  };
}

export class AdmissionController {
  private readonly queues: AdmissionQueues;
  private readonly learner: CapacityLearner;
  private readonly drain: DrainRate[];
  private readonly ceilings: number[];
  /** What queued requests need when they flow, by ticket id. */
  private readonly waiting = new Map<number, Waiting>();
  /** Pools whose published queue depths are not all zero. */
  private readonly publishedPools = new Set<number>();
  /** [pool][band][bucket]: each band's peak hold per bucket of the reserve window (work-conserving limits). */
  private readonly peaks: number[][][];
  private bucket = 0;
  private nextBucketAt = 0;

  constructor(
    private readonly table: EndpointTable,
    private readonly pools: PoolTable,
    private readonly stats: AdmissionStatsTable,
    private readonly directory: EndpointDirectory,
    private readonly chooser: EndpointChooser,
    private readonly admission: Config["admission"],
    private readonly staleAfterMs: number,
    /** Tie-breaks among equally scored endpoints (seeded in tests). */
    private readonly random: () => number = Math.random,
    /** Several gateways: this gateway's share of each pool; the published limits are scaled by it. */
    private readonly shares?: { get(pool: number): number },
  ) {
    const bands: BandSpec[] = admission.bands.map((b) => ({ name: b.name, ceiling: b.ceiling, queueLimit: b.queueLimit, ttlMs: b.ttlMs }));
    this.queues = new AdmissionQueues(bands, { fairness: admission.fairness, quantumTokens: admission.quantumTokens });
    this.learner = new CapacityLearner(table.rows, admission.initialCapacity);
    this.drain = bands.map(() => new DrainRate());
    this.ceilings = admission.enabled ? admission.bands.map((b) => b.ceiling) : admission.bands.map(() => 2);
    this.peaks = Array.from({ length: pools.pools }, () => admission.bands.map(() => new Array<number>(RESERVE_BUCKETS).fill(0)));
  }

  /**
   * Places each band leaves the bands above it: their peak over the reserve
   * window (the buckets and what they hold since the last bucket), with a
   * margin. Bands above a band are summed: peaks need not coincide, so this
   * errs on the side of the higher bands.
   */
  private reserves(pool: number, now: number): number[] | undefined {
    if (!this.admission.workConserving) return undefined;
    if (now >= this.nextBucketAt) {
      this.bucket = (this.bucket + 1) % RESERVE_BUCKETS;
      this.nextBucketAt = now + this.admission.reserveWindowMs / RESERVE_BUCKETS;
      for (let p = 0; p < this.pools.pools; p++) this.peaks[p]!.forEach((ring, b) => (ring[this.bucket] = this.pools.takeBandPeak(p, b)));
    }
    const rings = this.peaks[pool]!;
    let above = 0;
    return rings.map((ring, b) => {
      const reserve = Math.ceil(above * (1 + RESERVE_MARGIN)) + RESERVE_MIN_PLACES;
      above += Math.max(this.pools.bandPeakNow(pool, b), ...ring);
      return reserve;
    });
  }

  private members(pool: number, now: number): PoolMember[] {
    return this.directory.inPool(pool).map((e) => {
      const row = e.index;
      const at = this.table.getFloat(row, F.METRICS_AT);
      const stale = Number.isNaN(at) || now - at > this.staleAfterMs;
      const kv = this.table.getFloat(row, F.KV_USAGE);
      return {
        index: row,
        ready: this.table.getInt(row, I.READY) === 1,
        inflight: this.table.getInt(row, I.INFLIGHT),
        kvUsage: stale || Number.isNaN(kv) ? undefined : kv,
        stale,
      };
    });
  }

  /**
   * Fold the latest engine metrics into the learned capacities, and publish
   * every pool's band limits and saturation. Cheap (a pass over the
   * endpoints); run on every engine poll and before each slow-path decision.
   */
  refresh(now = Date.now()): void {
    for (const e of this.directory.all()) {
      const row = e.index;
      const at = this.table.getFloat(row, F.METRICS_AT);
      if (!Number.isNaN(at) && now - at <= this.staleAfterMs) this.learner.observe(row, this.table.optionalInt(row, I.RUNNING));
      this.table.setInt(row, I.CAPACITY, this.learner.capacity(row));
    }
    const capacity = (i: number) => this.learner.capacity(i);
    for (let pool = 0; pool < this.pools.pools; pool++) {
      const members = this.members(pool, now);
      if (members.length === 0) {
        this.ceilings.forEach((_, b) => this.pools.setLimit(pool, b, 0));
        continue;
      }
      const share = this.shares?.get(pool) ?? 1;
      bandLimits(members, capacity, this.admission, this.ceilings, UNLIMITED, this.reserves(pool, now)).forEach((limit, b) =>
        this.pools.setLimit(pool, b, scaleLimit(limit, share, UNLIMITED)),
      );
      this.stats.setSaturation(pool, poolSaturation(members, capacity, this.admission));
    }
  }

  /** An endpoint left its slot: start its capacity afresh if the slot is reused. */
  forget(index: number): void {
    this.learner.reset(index);
  }

  private grant(id: number, model: string, band: number, keys: RoutingKeys, adapter: number | undefined, waitedMs: number, now: number): Outcome {
    const c = this.chooser.choose({ model, ...keys, ...(adapter !== undefined ? { adapter } : {}) }, this.random, now);
    if (c.ok)
      return {
        type: "grant",
        id,
        index: c.index,
        pool: c.pool,
        band,
        scores: { ...c.scores },
        drops: { ...c.drops },
        candidates: c.candidates,
        waitedMs,
        probe: c.probe,
        circuit: c.circuit,
        prefillTokens: c.prefillTokens,
      };
    return { type: "reject", id, drops: { ...c.drops }, waitedMs, error: { code: "NO_READY_ENDPOINT", message: `no ready endpoint serves model '${model}'` } };
  }

  /** Claim a place in the pool, choose an endpoint, and give the place back when none is chosen. */
  private flow(
    id: number,
    model: string,
    pool: number,
    band: number,
    keys: RoutingKeys,
    adapter: number | undefined,
    waitedMs: number,
    claimed: boolean,
    now: number,
  ): Outcome {
    if (!claimed) this.pools.take(pool, band);
    const out = this.grant(id, model, band, keys, adapter, waitedMs, now);
    if (out.type === "reject") this.pools.release(pool, band);
    return out;
  }

  /** A new request: an immediate outcome, or undefined when it was queued. */
  admit(msg: AdmitMessage, now = Date.now()): Outcome | undefined {
    const keys = routingKeys(msg);
    if (!this.admission.enabled) return this.flow(msg.id, msg.model, msg.pool, msg.band, keys, msg.adapter, 0, false, now);
    // The limits published on the last engine poll, the same the fast path
    // claims against: both paths decide over the same figures.
    if (!this.members(msg.pool, now).some((m) => m.ready)) {
      return {
        type: "reject",
        id: msg.id,
        drops: {},
        waitedMs: 0,
        error: { code: "NO_READY_ENDPOINT", message: `no ready endpoint serves model '${msg.model}'` },
      };
    }
    // Requests already waiting in this band (or above) for this pool go first.
    if (this.pools.queuedAhead(msg.pool, msg.band) === 0 && this.pools.tryClaim(msg.pool, msg.band, Number.POSITIVE_INFINITY)) {
      this.drain[msg.band]?.record(now);
      return this.flow(msg.id, msg.model, msg.pool, msg.band, keys, msg.adapter, 0, true, now);
    }
    // The queues key pools by name; the row index is that name here.
    const ticket: Ticket = {
      id: msg.id,
      band: msg.band,
      tenant: msg.tenant,
      pool: String(msg.pool),
      model: msg.model,
      estTokens: msg.estTokens,
      enqueuedAt: now,
    };
    if (this.queues.enqueue(ticket) === "full") {
      const depth = this.queues.depth(msg.band);
      return {
        type: "reject",
        id: msg.id,
        drops: {},
        waitedMs: 0,
        error: {
          code: "ADMISSION_QUEUE_FULL",
          message: `the '${this.admission.bands[msg.band]?.name}' queue is full (${depth} waiting)`,
          retryAfterS: this.drain[msg.band]?.retryAfterSeconds(now, depth) ?? 1,
        },
      };
    }
    this.waiting.set(msg.id, { keys, poolIndex: msg.pool, adapter: msg.adapter });
    this.publishQueues();
    return undefined;
  }

  /** The client left while queued: gone from the queue at once. */
  cancel(id: number): boolean {
    const t = this.queues.cancel(id);
    this.waiting.delete(id);
    if (t) this.publishQueues();
    return t !== undefined;
  }

  /** Let queued requests flow while their limits allow; expire the old ones. */
  pump(now = Date.now()): Outcome[] {
    const out: Outcome[] = [];
    if (this.queues.total === 0) return out;
    this.refresh(now);
    for (const t of this.queues.expire(now)) {
      this.waiting.delete(t.id);
      out.push({
        type: "reject",
        id: t.id,
        drops: {},
        waitedMs: now - t.enqueuedAt,
        error: {
          code: "ADMISSION_TTL_EXPIRED",
          message: `waited ${now - t.enqueuedAt} ms in the '${this.admission.bands[t.band]?.name}' queue without capacity`,
        },
      });
    }
    for (;;) {
      // The claim is taken inside mayFlow, so a ticket leaves the queue only with its place.
      const t = this.queues.next((ticket) => {
        const w = this.waiting.get(ticket.id);
        return w !== undefined && this.pools.tryClaim(w.poolIndex, ticket.band, Number.POSITIVE_INFINITY);
      });
      if (!t) break;
      const w = this.waiting.get(t.id)!;
      this.waiting.delete(t.id);
      this.drain[t.band]?.record(now);
      out.push(this.flow(t.id, t.model, w.poolIndex, t.band, w.keys, w.adapter, now - t.enqueuedAt, true, now));
    }
    this.publishQueues();
    return out;
  }

  get queued(): number {
    return this.queues.total;
  }

  private publishQueues(): void {
    const bands = this.admission.bands;
    bands.forEach((_, b) => this.stats.setDepth(b, this.queues.depth(b)));
    const perPool = new Map<number, number[]>();
    bands.forEach((_, b) => {
      for (const [pool, n] of this.queues.poolDepths(b)) {
        const index = Number(pool);
        let row = perPool.get(index);
        if (!row) perPool.set(index, (row = bands.map(() => 0)));
        row[b] = n;
      }
    });
    for (const pool of this.publishedPools) if (!perPool.has(pool)) this.pools.setQueued(pool, ZEROES);
    this.publishedPools.clear();
    for (const [pool, row] of perPool) {
      this.pools.setQueued(pool, row);
      this.publishedPools.add(pool);
    }
  }
}
