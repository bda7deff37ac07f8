/**
 * The scheduler worker's logic (workers/scheduler.ts is its thin shell):
 * answers each schedule request with a grant — the endpoint chosen by the
 * scheduling profile over the shared endpoint table — and counts the grant as
 * a lease in the table at once, so a simultaneous burst sees its own grants.
 */
import type { Config } from "../config/types.ts";
import type { EndpointDescriptor, FromScheduler, ToScheduler } from "../protocol/scheduler-messages.ts";
import { SchedulingProfile } from "../scheduling/profile.ts";
import { CIRCUIT_HALF_OPEN, CIRCUIT_PROBING, EndpointTable, I } from "../shared/endpoint-table.ts";
import { readEndpointView } from "./endpoint-views.ts";

type ScheduleMessage = Extract<ToScheduler, { type: "schedule" }>;

export class SchedulerService {
  private readonly table: EndpointTable;
  private readonly endpoints: EndpointDescriptor[];
  private readonly profile: SchedulingProfile;
  private readonly staleAfterMs: number;

  constructor(table: EndpointTable, endpoints: EndpointDescriptor[], scheduling: Config["scheduling"], staleAfterMs: number) {
    this.table = table;
    this.endpoints = endpoints.map((e) => ({ ...e, models: [...e.models] }));
    this.profile = new SchedulingProfile(scheduling);
    this.staleAfterMs = staleAfterMs;
  }

  setModels(index: number, models: string[]): void {
    const d = this.endpoints[index];
    if (d) d.models = models;
  }

  schedule(msg: ScheduleMessage, random: () => number = Math.random): FromScheduler {
    const now = Date.now();
    const views = this.endpoints.map((d) => {
      const v = readEndpointView(this.table, d, now, this.staleAfterMs);
      // Learned batch capacity: the highest running count ever observed.
      if (v.running !== undefined && v.running > this.table.getInt(d.index, I.MAX_RUNNING_SEEN)) {
        this.table.setInt(d.index, I.MAX_RUNNING_SEEN, v.running);
      }
      return v;
    });
    const exclude = msg.exclude.length > 0 ? new Set(msg.exclude) : undefined;
    const decision = this.profile.schedule({ model: msg.model, prefixHashes: msg.prefixHashes, exclude }, views, random);
    const chosen = decision.endpoint;
    if (!chosen) {
      return {
        type: "reject",
        id: msg.id,
        drops: { ...decision.drops },
        error: { code: "NO_READY_ENDPOINT", message: `no ready endpoint serves model '${msg.model}'` },
      };
    }
    // A half-open circuit admits exactly one probe request.
    this.table.casInt(chosen.index, I.CIRCUIT, CIRCUIT_HALF_OPEN, CIRCUIT_PROBING);
    this.table.addInt(chosen.index, I.LEASED, 1);
    return { type: "grant", id: msg.id, index: chosen.index, scores: { ...decision.scores }, drops: { ...decision.drops } };
  }

  handle(msg: ToScheduler): FromScheduler | undefined {
    switch (msg.type) {
      case "init":
        return undefined; // handled by the shell, which constructs this service
      case "models":
        this.setModels(msg.index, msg.models);
        return undefined;
      case "schedule":
        return this.schedule(msg);
      default: {
        const unreachable: never = msg;
        throw new Error(`unknown message ${JSON.stringify(unreachable)}`);
      }
    }
  }
}
