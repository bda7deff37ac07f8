/**
 * Background responses (`background: true`, OpenAI's "Background mode"):
 * the request is stored queued and answered at once; a runner claims it
 * (a lease renewed while it runs, so a runner that dies lets another
 * gateway take it over) and sends it through the gateway's own request path
 * in process, as its tenant, where the answer is stored in place of the
 * placeholder. A refusal to wait out (429, 503: quota, saturation, no
 * endpoint ready) queues it again after a backoff; any other failure is
 * recorded as `failed` with the error. Cancelling marks it `cancelled`
 * (compare-and-set: a finished response stays finished) and aborts the run
 * where it runs here; a run elsewhere sees the mark when its answer comes.
 */
import { logger } from "../shared/logger.ts";
import { type BackgroundRequest, type ResponseRecord, RUNNING } from "./responses-objects.ts";
import type { ResponsesStore } from "./responses-store.ts";

/** The outcome of one run through the request path. */
interface BackgroundResult {
  status: number;
  /** The error object of a failed answer (OpenAI's shape). */
  error?: { code: string; message: string };
}

/** Runs one background response through the gateway's request path; the answer is stored there under `id`. */
export type BackgroundSend = (req: BackgroundRequest, target: { tenant: string; id: string }, signal: AbortSignal) => Promise<BackgroundResult>;

interface BackgroundOptions {
  store: ResponsesStore;
  send: BackgroundSend;
  concurrency: number;
  /** How often to look for work not woken for (leases lapsed, backoffs over). */
  tickMs: number;
  leaseMs?: number;
  now?: () => number;
}

/** A run's lease: renewed every third of it. */
const DEFAULT_LEASE_MS = 30_000;
/** A run refused for now (429, 503) is tried again after this. */
const REQUEUE_BACKOFF_MS = 1_000;

function withStatus(response: string, status: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ ...(JSON.parse(response) as Record<string, unknown>), status, ...extra });
}

export class BackgroundResponses {
  readonly #o: BackgroundOptions;
  readonly #now: () => number;
  readonly #lease: number;
  readonly #owner = `gateway-${process.pid}-${crypto.randomUUID()}`;
  /** `${tenant}\0${id}` → the run's abort controller. */
  readonly #running = new Map<string, { tenant: string; id: string; ac: AbortController }>();
  readonly #settling = new Set<Promise<void>>();
  #timers: ReturnType<typeof setInterval>[] = [];
  #pumping: Promise<void> | undefined;
  #dirty = false;
  #started = false;

  constructor(opts: BackgroundOptions) {
    this.#o = opts;
    this.#now = opts.now ?? Date.now;
    this.#lease = opts.leaseMs ?? DEFAULT_LEASE_MS;
  }

  start(): void {
    if (this.#started) return;
    this.#started = true;
    const renew = () => {
      const ids = [...this.#running.values()].map(({ tenant, id }) => ({ tenant, id }));
      void this.#o.store.renew(this.#owner, ids, this.#now() + this.#lease).catch(logError("renewing background leases"));
    };
    this.#timers = [setInterval(() => this.wake(), this.#o.tickMs), setInterval(renew, Math.max(100, this.#lease / 3))];
    this.wake();
  }

  /** Stop claiming and abort what runs here (its lease lapses and another runner, or the next start, takes it up). */
  async stop(): Promise<void> {
    this.#started = false;
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    for (const run of this.#running.values()) run.ac.abort(new Error("gateway stopping"));
    await this.#pumping;
    await Promise.all([...this.#settling]);
  }

  /** Look for work now (a background response was created, or one finished). */
  wake(): void {
    if (!this.#started) return;
    this.#dirty = true;
    if (this.#pumping !== undefined) return;
    this.#pumping = (async () => {
      while (this.#dirty && this.#started) {
        this.#dirty = false;
        try {
          await this.#pump();
        } catch (err) {
          logError("claiming background responses")(err);
        }
      }
      this.#pumping = undefined;
    })();
  }

  /** Abort the run of (tenant, id) if it runs here. */
  abort(tenant: string, id: string): void {
    this.#running.get(`${tenant}\u0000${id}`)?.ac.abort(new Error("cancelled"));
  }

  /** Background responses running here now. */
  get running(): number {
    return this.#running.size;
  }

  async #pump(): Promise<void> {
    const free = this.#o.concurrency - this.#running.size;
    if (free <= 0) return;
    const now = this.#now();
    for (const r of await this.#o.store.claim(this.#owner, now, now + this.#lease, free)) {
      const key = `${r.tenant}\u0000${r.id}`;
      if (this.#running.has(key)) continue;
      const run = { tenant: r.tenant, id: r.id, ac: new AbortController() };
      this.#running.set(key, run);
      const p = this.#run(r, run.ac.signal)
        .catch(logError(`running background response ${r.id}`))
        .finally(() => {
          this.#running.delete(key);
          this.#settling.delete(p);
          this.wake();
        });
      this.#settling.add(p);
    }
  }

  async #run(r: ResponseRecord, signal: AbortSignal): Promise<void> {
    const { store } = this.#o;
    const started = await store.update(r.tenant, r.id, RUNNING, { status: "in_progress", response: withStatus(r.response, "in_progress") });
    if (started === undefined || started.request === undefined) return; // cancelled (or gone) meanwhile
    const req = JSON.parse(started.request) as BackgroundRequest;
    const result = await this.#o.send(req, { tenant: r.tenant, id: r.id }, signal);
    if (signal.aborted) return;
    if (result.status === 429 || result.status === 503) {
      // Refused for now (quota, saturation, nothing ready): queued again, claimable after the backoff.
      await store.update(r.tenant, r.id, ["in_progress"], {
        status: "queued",
        response: withStatus(started.response, "queued"),
        owner: null,
        leaseUntilMs: this.#now() + REQUEUE_BACKOFF_MS,
      });
      setTimeout(() => this.wake(), REQUEUE_BACKOFF_MS + 10).unref?.();
      return;
    }
    // A 2xx answer was stored by the request path; anything else (or an answer that could not be stored) fails the response.
    const error = result.error ?? { code: "server_error", message: `the request ended with status ${result.status} and no answer to store` };
    await store.update(r.tenant, r.id, ["in_progress"], {
      status: "failed",
      response: withStatus(started.response, "failed", { error }),
      request: null,
      owner: null,
      leaseUntilMs: null,
    });
  }
}

function logError(what: string): (err: unknown) => void {
  return (err) => logger().error({ err: err instanceof Error ? err.message : String(err) }, what);
}
