/**
 * Scoring in the scheduler worker: picks the endpoint for a request with the
 * scheduling profile over the shared endpoint table, and counts the grant as
 * a lease in the table at once, so a simultaneous burst sees its own grants.
 */
import type { Config } from "../config/types.ts";
import type { EndpointDescriptor, FromScheduler } from "../protocol/scheduler-messages.ts";
import { SchedulingProfile } from "../scheduling/profile.ts";
import { CIRCUIT_HALF_OPEN, CIRCUIT_PROBING, EndpointTable, I } from "../shared/endpoint-table.ts";
import { readEndpointView } from "./endpoint-views.ts";

export interface ScoreRequest {
  id: number;
  model: string;
  prefixHashes: readonly number[];
  exclude: readonly number[];
  /** Time the request spent queued for admission, ms. */
  waitedMs: number;
}

export class SchedulerService {
  readonly endpoints: EndpointDescriptor[];
  private readonly profile: SchedulingProfile;

  constructor(
    private readonly table: EndpointTable,
    endpoints: EndpointDescriptor[],
    scheduling: Config["scheduling"],
    private readonly staleAfterMs: number,
  ) {
    this.endpoints = endpoints.map((e) => ({ ...e, models: [...e.models] }));
    this.profile = new SchedulingProfile(scheduling);
  }

  setModels(index: number, models: string[]): void {
    const d = this.endpoints[index];
    if (d) d.models = models;
  }

  schedule(req: ScoreRequest, random: () => number = Math.random): Extract<FromScheduler, { type: "grant" | "reject" }> {
    const now = Date.now();
    const views = this.endpoints.map((d) => readEndpointView(this.table, d, now, this.staleAfterMs));
    const exclude = req.exclude.length > 0 ? new Set(req.exclude) : undefined;
    const decision = this.profile.schedule({ model: req.model, prefixHashes: req.prefixHashes, exclude }, views, random);
    const chosen = decision.endpoint;
    if (!chosen) {
      return {
        type: "reject",
        id: req.id,
        drops: { ...decision.drops },
        waitedMs: req.waitedMs,
        error: { code: "NO_READY_ENDPOINT", message: `no ready endpoint serves model '${req.model}'` },
      };
    }
    // A half-open circuit admits exactly one probe request.
    const probe = this.table.casInt(chosen.index, I.CIRCUIT, CIRCUIT_HALF_OPEN, CIRCUIT_PROBING);
    this.table.addInt(chosen.index, I.LEASED, 1);
    return { type: "grant", id: req.id, index: chosen.index, scores: { ...decision.scores }, drops: { ...decision.drops }, waitedMs: req.waitedMs, probe };
  }
}
