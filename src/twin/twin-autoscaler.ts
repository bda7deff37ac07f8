/**
 * An autoscaler in the twin: the control plane's own (src/control/
 * autoscale/) deciding every interval on what a gateway samples — arrivals
 * and their prompt tokens, requests in flight, TTFTs and inter-token times, and each serving
 * replica's running, waiting and KV usage as its last poll wrote them into
 * the endpoint table — its desired count applied through the twin's fleet
 * manager, as `llmgw ctl scale` would. Without an autoscaler the fleet stays
 * as placed (a static fleet) and only the timeline is sampled.
 */
import type { AutoscaleDecision, Autoscaler } from "../control/autoscale/autoscaler.ts";
import type { ReplicaLoad } from "../control/autoscale/signals.ts";
import { F, I } from "../shared/endpoint-table.ts";
import type { TwinFleet } from "./twin-fleet.ts";
import type { TwinFleetManager } from "./twin-fleet-manager.ts";

/** One interval of a run, as the report charts it. */
export interface AutoscaleTimelinePoint {
  at_s: number;
  arrival_rps: number;
  provisioned: number;
  ready: number;
  /** The desired count after this interval's decision (a static fleet: its size). */
  desired: number;
  /** Percentiles of the interval's first tokens and finished requests, ms (null: none). */
  ttft_p_ms: number | null;
  itl_p_ms: number | null;
  /** Share of the requests that finished in the interval meeting both SLOs (null: none finished). */
  attainment: number | null;
  reason?: AutoscaleDecision["reason"];
}

interface Slo {
  ttftMs: number;
  itlMs: number;
  percentile: number;
}

export class TwinAutoscaler {
  readonly timeline: AutoscaleTimelinePoint[] = [];
  private arrivals = 0;
  private promptTokens = 0;
  private inflight = 0;
  private ttft: number[] = [];
  private itl: number[] = [];
  private finished = 0;
  private met = 0;
  private stopped = false;
  private lastAt = 0;

  constructor(
    private readonly fleet: TwinFleet,
    private readonly manager: TwinFleetManager,
    private readonly slo: Slo,
    private readonly intervalMs: number,
    /** The control plane's autoscaler, or any controller deciding on the same samples (a bench's scheduled one). */
    readonly autoscaler?: Pick<Autoscaler, "decide">,
    /** `promptTokens: false` samples as a gateway that does not count them would (the law then has no prefill bound). */
    private readonly sampling: { promptTokens: boolean } = { promptTokens: true },
  ) {}

  start(): void {
    const loop = () => {
      if (this.stopped) return;
      this.tick();
      this.fleet.clock.after(this.intervalMs, loop);
    };
    this.lastAt = this.fleet.clock.now;
    this.fleet.clock.after(this.intervalMs, loop);
  }

  stop(): void {
    this.stopped = true;
  }

  sent(promptTokens: number): void {
    this.arrivals++;
    this.promptTokens += promptTokens;
    this.inflight++;
  }

  firstToken(ttftMs: number): void {
    this.ttft.push(ttftMs);
  }

  ended(r: { ttftMs?: number; tpotMs?: number; status: number }): void {
    this.inflight--;
    if (r.tpotMs !== undefined) this.itl.push(r.tpotMs);
    this.finished++;
    if (meets(r, this.slo)) this.met++;
  }

  private replicaLoads(): ReplicaLoad[] {
    const table = this.fleet.gateway.tables.table;
    return this.manager.servingSlots().map((slot) => ({
      running: Math.max(0, table.getInt(slot, I.RUNNING)),
      waiting: Math.max(0, table.getInt(slot, I.WAITING)),
      kvUsage: table.getFloat(slot, F.KV_USAGE),
    }));
  }

  private tick(): void {
    const now = this.fleet.clock.now;
    const { provisioned, ready } = this.manager.counts();
    const startupMs = this.manager.measuredStartupMs();
    const placeable = this.manager.placeable();
    let decision: AutoscaleDecision | undefined;
    if (this.autoscaler) {
      decision = this.autoscaler.decide({
        at: now,
        arrivals: this.arrivals,
        ...(this.sampling.promptTokens ? { promptTokens: this.promptTokens } : {}),
        inflight: this.inflight,
        ttftMs: this.ttft,
        itlMs: this.itl,
        replicas: this.replicaLoads(),
        provisioned,
        ready,
        placeable,
        ...(startupMs !== undefined ? { startupMs } : {}),
      });
      this.manager.scaleTo(decision.desired);
    }
    const spanS = (now - this.lastAt) / 1000;
    this.timeline.push({
      at_s: now / 1000,
      arrival_rps: spanS > 0 ? Math.round((this.arrivals / spanS) * 1000) / 1000 : 0,
      provisioned,
      ready,
      desired: decision?.desired ?? provisioned,
      ttft_p_ms: percentile(this.ttft, this.slo.percentile),
      itl_p_ms: percentile(this.itl, this.slo.percentile),
      attainment: this.finished > 0 ? this.met / this.finished : null,
      ...(decision ? { reason: decision.reason } : {}),
    });
    this.lastAt = now;
    this.arrivals = 0;
    this.promptTokens = 0;
    this.ttft = [];
    this.itl = [];
    this.finished = 0;
    this.met = 0;
  }
}

/** A request meets its SLOs: answered, its first token within the TTFT target and its mean inter-token time within the ITL target. */
export function meets(r: { ttftMs?: number; tpotMs?: number; status: number }, slo: Slo): boolean {
  return r.status === 200 && r.ttftMs !== undefined && r.ttftMs <= slo.ttftMs && (r.tpotMs ?? 0) <= slo.itlMs;
}

function percentile(values: number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return Math.round(sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! * 10) / 10;
}
