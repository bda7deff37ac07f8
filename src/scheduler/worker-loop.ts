/**
 * The scheduler worker's message loop (workers/scheduler.ts is its shell):
 * admission and scoring for every request, a re-check of the queues when a
 * request finishes, and a short tick while anything is queued (engine
 * metrics change without a message).
 */
import type { FromScheduler, ToScheduler } from "../protocol/scheduler-messages.ts";
import { AdmissionStatsTable, EndpointTable } from "../shared/endpoint-table.ts";
import { AdmissionController } from "./admission-controller.ts";
import { SchedulerService } from "./service.ts";

/** Queue re-check period while requests wait; also how late a TTL may fire. */
const QUEUE_TICK_MS = 5;
/** Capacity learning and saturation publishing when nothing waits. */
const IDLE_TICK_MS = 250;

type Init = Extract<ToScheduler, { type: "init" }>;

export class SchedulerWorkerLoop {
  private readonly scorer: SchedulerService;
  private readonly admission: AdmissionController;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Infinity;

  constructor(init: Init, private readonly reply: (msg: FromScheduler) => void) {
    const table = new EndpointTable(init.endpoints.length, init.buffer);
    const stats = new AdmissionStatsTable(init.admission.bands.length, init.pools.length, init.statsBuffer);
    this.scorer = new SchedulerService(table, init.endpoints, init.scheduling, init.staleAfterMs);
    this.admission = new AdmissionController(table, stats, this.scorer, init.pools, init.admission, init.staleAfterMs);
    this.arm();
  }

  handle(msg: ToScheduler): void {
    switch (msg.type) {
      case "init":
        return; // constructed from it
      case "models":
        this.scorer.setModels(msg.index, msg.models);
        return;
      case "admit": {
        const out = this.admission.admit(msg);
        if (out) this.reply(out);
        else this.arm();
        return;
      }
      case "schedule":
        this.reply(this.scorer.schedule({ id: msg.id, model: msg.model, prefixHashes: msg.prefixHashes, exclude: msg.exclude, waitedMs: 0 }));
        return;
      case "cancel":
        this.admission.cancel(msg.id);
        return;
      case "release":
        if (this.admission.queued > 0) this.pump();
        return;
      default: {
        const unreachable: never = msg;
        throw new Error(`unknown message ${JSON.stringify(unreachable)}`);
      }
    }
  }

  private pump(): void {
    for (const out of this.admission.pump()) this.reply(out);
  }

  /** (Re)arm the tick: fast while something is queued, slow otherwise. */
  private arm(): void {
    const period = this.admission.queued > 0 ? QUEUE_TICK_MS : IDLE_TICK_MS;
    const at = performance.now() + period;
    if (this.timer !== undefined && this.timerAt <= at) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Infinity;
      this.pump();
      this.arm();
    }, period);
  }
}
