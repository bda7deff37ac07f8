/**
 * Admission in the scheduler worker: decides *when* a request may proceed,
 * before scoring decides *where*. A request flows at once when its band's
 * ceiling is above its pool's saturation; otherwise it waits in its band's
 * bounded queue (tenants taking turns) until saturation drops, its TTL
 * expires (504) or its client leaves. Dispatch across bands is strict
 * priority. Each flowing request is scored at once, and the grant counts as
 * a lease in the endpoint table before the next decision.
 */
import { AdmissionQueues, type BandSpec } from "../admission/admission-queues.ts";
import { DrainRate } from "../admission/drain-rate.ts";
import type { Ticket } from "../admission/flow-queues.ts";
import { CapacityLearner, poolSaturation, type PoolMember } from "../admission/saturation.ts";
import type { Config } from "../config/types.ts";
import type { FromScheduler, ToScheduler } from "../protocol/scheduler-messages.ts";
import { AdmissionStatsTable, EndpointTable, F, I } from "../shared/endpoint-table.ts";
import type { SchedulerService } from "./service.ts";

type AdmitMessage = Extract<ToScheduler, { type: "admit" }>;
type Outcome = Extract<FromScheduler, { type: "grant" | "reject" }>;

export class AdmissionController {
  private readonly queues: AdmissionQueues;
  private readonly learner: CapacityLearner;
  private readonly drain: DrainRate[];
  private readonly poolIndex = new Map<string, number>();
  /** Prefix hashes of queued requests, by ticket id (scoring needs them at flow time). */
  private readonly pending = new Map<number, number[]>();

  constructor(
    private readonly table: EndpointTable,
    private readonly stats: AdmissionStatsTable,
    private readonly scorer: SchedulerService,
    pools: readonly string[],
    private readonly admission: Config["admission"],
    private readonly staleAfterMs: number,
  ) {
    const bands: BandSpec[] = admission.bands.map((b) => ({ name: b.name, ceiling: b.ceiling, queueLimit: b.queueLimit, ttlMs: b.ttlMs }));
    this.queues = new AdmissionQueues(bands, { fairness: admission.fairness, quantumTokens: admission.quantumTokens });
    this.learner = new CapacityLearner(table.rows, admission.initialCapacity);
    this.drain = bands.map(() => new DrainRate());
    pools.forEach((p, i) => this.poolIndex.set(p, i));
  }

  /** The pool a model is admitted against: the one holding most of its endpoints. */
  private poolOf(model: string): string | undefined {
    const counts = new Map<string, number>();
    for (const e of this.scorer.endpoints) if (e.models.includes(model)) counts.set(e.pool, (counts.get(e.pool) ?? 0) + 1);
    let best: string | undefined;
    let bestN = 0;
    for (const [pool, n] of counts) {
      if (n > bestN) {
        best = pool;
        bestN = n;
      }
    }
    return best;
  }

  private members(pool: string, now: number): PoolMember[] {
    const out: PoolMember[] = [];
    for (const e of this.scorer.endpoints) {
      if (e.pool !== pool) continue;
      const row = e.index;
      const at = this.table.getFloat(row, F.METRICS_AT);
      const stale = Number.isNaN(at) || now - at > this.staleAfterMs;
      const kv = this.table.getFloat(row, F.KV_USAGE);
      out.push({
        index: row,
        ready: this.table.getInt(row, I.READY) === 1,
        inflight: this.table.getInt(row, I.INFLIGHT) + this.table.getInt(row, I.LEASED),
        kvUsage: stale || Number.isNaN(kv) ? undefined : kv,
        stale,
      });
    }
    return out;
  }

  saturation(pool: string, now = Date.now()): number {
    return poolSaturation(this.members(pool, now), (i) => this.learner.capacity(i), this.admission);
  }

  /** Fold the latest engine metrics into the learned capacities (and publish them). */
  private learn(now: number): void {
    for (const e of this.scorer.endpoints) {
      const row = e.index;
      const at = this.table.getFloat(row, F.METRICS_AT);
      if (!Number.isNaN(at) && now - at <= this.staleAfterMs) {
        this.learner.observe(row, this.table.optionalInt(row, I.RUNNING));
      }
      this.table.setInt(row, I.CAPACITY, this.learner.capacity(row));
    }
  }

  private mayFlow(t: Ticket, now: number): boolean {
    const band = this.admission.bands[t.band];
    if (!band) return false;
    if (band.ceiling > 1) return true;
    return this.saturation(t.pool, now) < band.ceiling;
  }

  private grantOrReject(id: number, model: string, prefixHashes: readonly number[], waitedMs: number): Outcome {
    return this.scorer.schedule({ id, model, prefixHashes, exclude: [], waitedMs });
  }

  /** A new request: an immediate outcome, or undefined when it was queued. */
  admit(msg: AdmitMessage, now = Date.now()): Outcome | undefined {
    if (!this.admission.enabled) return this.grantOrReject(msg.id, msg.model, msg.prefixHashes, 0);
    const pool = this.poolOf(msg.model);
    const noEndpoint = (): Outcome => ({
      type: "reject",
      id: msg.id,
      drops: {},
      waitedMs: 0,
      error: { code: "NO_READY_ENDPOINT", message: `no ready endpoint serves model '${msg.model}'` },
    });
    if (pool === undefined) return noEndpoint();
    // Capacities are refreshed on the worker's tick (engine metrics change
    // once per scrape), not on every request.
    const members = this.members(pool, now);
    if (!members.some((m) => m.ready)) return noEndpoint();
    const ticket: Ticket = { id: msg.id, band: msg.band, tenant: msg.tenant, pool, model: msg.model, estTokens: msg.estTokens, enqueuedAt: now };
    // Requests already waiting in this band (or above) go first: flowing at
    // once is only for a band with nothing queued ahead for the same pool.
    if (this.queues.depth(msg.band) === 0 && this.higherBandsEmpty(msg.band) && this.mayFlow(ticket, now)) {
      this.drain[msg.band]?.record(now);
      return this.grantOrReject(msg.id, msg.model, msg.prefixHashes, 0);
    }
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
    this.pending.set(msg.id, msg.prefixHashes);
    this.publish(now);
    return undefined;
  }

  private higherBandsEmpty(band: number): boolean {
    for (let b = 0; b < band; b++) if (this.queues.depth(b) > 0) return false;
    return true;
  }

  /** The client left while queued: gone from the queue at once. */
  cancel(id: number, now = Date.now()): boolean {
    const t = this.queues.cancel(id);
    this.pending.delete(id);
    if (t) this.publish(now);
    return t !== undefined;
  }

  /** Let queued requests flow while saturation allows; expire the old ones. */
  pump(now = Date.now()): Outcome[] {
    const out: Outcome[] = [];
    this.learn(now);
    if (this.queues.total === 0) {
      this.publish(now);
      return out;
    }
    for (const t of this.queues.expire(now)) {
      this.pending.delete(t.id);
      out.push({
        type: "reject",
        id: t.id,
        drops: {},
        waitedMs: now - t.enqueuedAt,
        error: { code: "ADMISSION_TTL_EXPIRED", message: `waited ${now - t.enqueuedAt} ms in the '${this.admission.bands[t.band]?.name}' queue without capacity` },
      });
    }
    for (;;) {
      const t = this.queues.next((ticket) => this.mayFlow(ticket, now));
      if (!t) break;
      const hashes = this.pending.get(t.id) ?? [];
      this.pending.delete(t.id);
      this.drain[t.band]?.record(now);
      out.push(this.grantOrReject(t.id, t.model, hashes, now - t.enqueuedAt));
    }
    this.publish(now);
    return out;
  }

  get queued(): number {
    return this.queues.total;
  }

  private publish(now: number): void {
    this.admission.bands.forEach((_, b) => this.stats.setDepth(b, this.queues.depth(b)));
    for (const [pool, i] of this.poolIndex) this.stats.setSaturation(i, this.saturation(pool, now));
  }
}
