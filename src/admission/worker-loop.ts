/**
 * The scheduler worker's loop (workers/scheduler.ts is its shell): keeps the
 * flow limits in the shared pool table current — at once after every engine
 * poll (the health worker bumps a shared epoch and the loop waits on it with
 * Atomics.waitAsync), and on a slow tick for metrics that go stale without a
 * poll — and serves the slow path: requests the main thread sent because their
 * pool was saturated or something already waited there.
 */
import type { FromScheduler, ToScheduler } from "../protocol/scheduler-messages.ts";
import { KvBlockIndex } from "../scheduling/kv-block-index.ts";
import { PrefixIndex } from "../scheduling/prefix-index.ts";
import { SchedulingProfile } from "../scheduling/profile.ts";
import { AdmissionStatsTable, EndpointTable, PoolTable, S, Signals } from "../shared/endpoint-table.ts";
import { KvEventStats } from "../shared/kv-event-stats.ts";
import { LoraTable } from "../shared/lora-table.ts";
import { PoolShareTable } from "../shared/pool-shares.ts";
import { EndpointChooser } from "./chooser.ts";
import { AdmissionController } from "./controller.ts";
import { decisionRecorderFromEnv } from "./decision-record.ts";
import { EndpointDirectory } from "./endpoint-directory.ts";

/** Queue re-check period while requests wait; also how late a TTL may fire. */
export const QUEUE_TICK_MS = 5;
/** Limits are recomputed at least this often when no engine poll arrives (staleness is a matter of time). */
export const IDLE_TICK_MS = 250;

type Init = Extract<ToScheduler, { type: "init" }>;

export class SchedulerWorkerLoop {
  private readonly directory: EndpointDirectory;
  private readonly admission: AdmissionController;
  private readonly signals: Signals;
  private readonly chooser: EndpointChooser;
  private readonly prefixIndex: PrefixIndex;
  private readonly kvIndex: KvBlockIndex;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Infinity;
  private stopped = false;

  constructor(
    init: Init,
    private readonly reply: (msg: FromScheduler) => void,
  ) {
    const table = new EndpointTable(init.maxEndpoints, init.endpoints);
    const pools = new PoolTable(init.maxPools, init.admission.bands.length, init.pools);
    const stats = new AdmissionStatsTable(init.admission.bands.length, init.maxPools, init.stats);
    this.signals = new Signals(init.signals);
    this.directory = new EndpointDirectory(init.directory);
    this.prefixIndex = new PrefixIndex(init.scheduling.prefixAffinity.lruEntries, init.prefixIndex);
    this.kvIndex = new KvBlockIndex(init.kvIndexCapacity, new KvEventStats(init.maxEndpoints, init.kvStats), init.kvIndex);
    const lora = init.lora ? new LoraTable(init.maxEndpoints, init.lora) : undefined;
    const recorder = decisionRecorderFromEnv();
    const chooser = new EndpointChooser(
      table,
      this.directory,
      new SchedulingProfile(init.scheduling, undefined, this.prefixIndex, this.kvIndex),
      init.staleAfterMs,
      lora,
      recorder ? { thread: "scheduler", to: recorder } : undefined,
    );
    this.chooser = chooser;
    const shares = init.shares ? new PoolShareTable(init.maxPools, init.shares) : undefined;
    this.admission = new AdmissionController(table, pools, stats, this.directory, chooser, init.admission, init.staleAfterMs, undefined, shares);
    this.admission.refresh();
    this.arm();
    void this.followEngineMetrics();
  }

  handle(msg: ToScheduler): void {
    switch (msg.type) {
      case "init":
        return; // constructed from it
      case "endpoint":
        if (msg.descriptor === null) this.admission.forget(msg.index);
        this.directory.set(msg.index, msg.descriptor ?? undefined);
        this.admission.refresh();
        return;
      case "models":
        this.directory.setModels(msg.index, msg.models);
        return;
      case "scheduling":
        this.chooser.useProfile(new SchedulingProfile(msg.scheduling, undefined, this.prefixIndex, this.kvIndex));
        return;
      case "admit": {
        const out = this.admission.admit(msg);
        if (out) this.reply(out);
        else this.arm();
        return;
      }
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

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private pump(): void {
    for (const out of this.admission.pump()) this.reply(out);
  }

  /** Recompute the limits as soon as the health worker wrote a poll (and let waiting requests flow). */
  private async followEngineMetrics(): Promise<void> {
    let seen = this.signals.get(S.METRICS_EPOCH);
    while (!this.stopped) {
      const w = Atomics.waitAsync(this.signals.ints, S.METRICS_EPOCH, seen);
      if (w.async) await w.value;
      seen = this.signals.get(S.METRICS_EPOCH);
      if (this.admission.queued > 0) this.pump();
      else this.admission.refresh();
    }
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
      if (this.admission.queued > 0) this.pump();
      else this.admission.refresh();
      if (!this.stopped) this.arm();
    }, period);
  }
}
