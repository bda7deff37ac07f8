/**
 * Cold starts of models the fleet scales to zero, for the cold-start gate:
 * which request names (a model, or one of its adapters) are at zero now,
 * and one shared wait per model — the first request asks the autoscaler
 * for a replica, every request waiting is released together when one
 * serves (checked every COLD_START_POLL_MS while any waits), each gives up
 * at its own deadline or when its client leaves. At most
 * MAX_COLD_START_WAITERS wait per model. Each cold start writes one audit
 * line when its first replica serves or its last waiting request gave up.
 */
import type { FleetAutoscalingSpec } from "../config/types.ts";
import type { FleetManager } from "../control/fleet-manager.ts";
import type { ColdStartOutcome, ColdStartWaits } from "../gateway/cold-start-waits.ts";
import { coldStartAuditRecord } from "../shared/audit.ts";
import { infoRecord, type Logger } from "../shared/logger.ts";

/** How often a cold start looks for a serving replica, ms. */
const COLD_START_POLL_MS = 100;
/** Requests that may wait for one model's cold start at once. */
const MAX_COLD_START_WAITERS = 1_000;
/** Without a cold_start_wait_ms, a request waits this long, ms. */
const DEFAULT_COLD_START_WAIT_MS = 60_000;
/** The request names of scaled-to-zero models are re-read at most this often, ms. */
const NAMES_REFRESH_MS = 1_000;
/** Without a measured start-up, the start-up a Retry-After assumes. */
const DEFAULT_ASSUMED_STARTUP_MS = 120_000;

interface Waiter {
  settle(o: ColdStartOutcome): void;
}

interface Episode {
  startedAt: number;
  first: { requestId: string; tenant: string; route: string };
  waiters: Set<Waiter>;
  served: number;
  gaveUp: number;
  poll: ReturnType<typeof setInterval>;
}

export class ColdStarts implements ColdStartWaits {
  /** Request name → its model and the model's autoscaling, for models that scale to zero. */
  private names = new Map<string, { model: string; autoscaling: FleetAutoscalingSpec }>();
  private namesAt = -Infinity;
  private readonly episodes = new Map<string, Episode>();

  constructor(
    private readonly fleet: Pick<FleetManager, "servingCount" | "state" | "autoscaler">,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  waitFor(name: string): number | undefined {
    const entry = this.lookup(name);
    if (!entry || this.fleet.servingCount(entry.model) > 0) return undefined;
    return entry.autoscaling.coldStartWaitMs ?? DEFAULT_COLD_START_WAIT_MS;
  }

  wait(name: string, x: { requestId: string; tenant: string; path: string }, signal: AbortSignal, waitMs: number): Promise<ColdStartOutcome> {
    const model = this.lookup(name)?.model ?? name;
    let ep = this.episodes.get(model);
    if (ep && ep.waiters.size >= MAX_COLD_START_WAITERS) {
      ep.gaveUp++;
      return Promise.resolve({ kind: "full", waiting: ep.waiters.size });
    }
    if (!ep) ep = this.begin(model, { requestId: x.requestId, tenant: x.tenant, route: x.path });
    const episode = ep;
    return new Promise<ColdStartOutcome>((resolve) => {
      const timer = setTimeout(() => settle({ kind: "timeout", retryAfterS: this.retryAfterS(model, episode) }), waitMs);
      const onAbort = () => settle({ kind: "aborted" });
      const waiter: Waiter = { settle: (o) => settle(o) };
      const settle = (o: ColdStartOutcome) => {
        if (!episode.waiters.delete(waiter)) return;
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        if (o.kind === "serving") episode.served++;
        else episode.gaveUp++;
        resolve(o);
        if (episode.waiters.size === 0 && o.kind !== "serving") this.end(model, episode, "unserved");
      };
      episode.waiters.add(waiter);
      if (signal.aborted) return onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Stop every wait (the gateway is closing): each waiting request gives up. */
  close(): void {
    for (const ep of this.episodes.values()) for (const w of [...ep.waiters]) w.settle({ kind: "timeout", retryAfterS: 1 });
  }

  private lookup(name: string): { model: string; autoscaling: FleetAutoscalingSpec } | undefined {
    const now = this.now();
    if (now - this.namesAt >= NAMES_REFRESH_MS) {
      this.namesAt = now;
      const names = new Map<string, { model: string; autoscaling: FleetAutoscalingSpec }>();
      for (const m of this.fleet.state.models.values()) {
        const a = m.spec.autoscaling;
        if (!a?.scaleToZero) continue;
        for (const n of [m.spec.name, ...m.spec.adapters.map((x) => x.name)]) names.set(n, { model: m.spec.name, autoscaling: a });
      }
      this.names = names;
    }
    return this.names.get(name);
  }

  private begin(model: string, first: Episode["first"]): Episode {
    const ep: Episode = {
      startedAt: this.now(),
      first,
      waiters: new Set(),
      served: 0,
      gaveUp: 0,
      poll: setInterval(() => {
        if (this.fleet.servingCount(model) === 0) return;
        for (const w of [...ep.waiters]) w.settle({ kind: "serving" });
        this.end(model, ep, "serving");
      }, COLD_START_POLL_MS),
    };
    this.episodes.set(model, ep);
    this.log.info({ model, request_id: first.requestId }, "cold start: a request found the model at zero replicas; asking for one");
    this.fleet.autoscaler?.coldStart(model).catch((err) => this.log.error({ err, model }, "cold start: the autoscaler's decision failed"));
    return ep;
  }

  private end(model: string, ep: Episode, outcome: "serving" | "unserved"): void {
    if (this.episodes.get(model) !== ep) return;
    clearInterval(ep.poll);
    this.episodes.delete(model);
    const record = coldStartAuditRecord({
      model,
      requestId: ep.first.requestId,
      tenant: ep.first.tenant,
      route: ep.first.route,
      startedAtMs: ep.startedAt,
      endedAtMs: this.now(),
      outcome,
      served: ep.served,
      gaveUp: ep.gaveUp,
    });
    infoRecord(this.log, record, "audit");
  }

  /** What is left of the model's start-up (measured, else assumed), at least a second. */
  private retryAfterS(model: string, ep: Episode): number {
    const status = this.fleet.autoscaler?.status().find((m) => m.model === model);
    const startup = status?.measuredStartupMs ?? status?.policy.startupMs ?? DEFAULT_ASSUMED_STARTUP_MS;
    return Math.max(1, Math.ceil((startup - (this.now() - ep.startedAt)) / 1000));
  }
}
