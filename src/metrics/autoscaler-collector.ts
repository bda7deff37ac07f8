/**
 * The autoscaler's series, computed when Prometheus scrapes from one read of
 * its models: decisions by reason (a counter every reason of every
 * autoscaled model exports, zeros included), what the law last asked for,
 * the replicas it counted, whether an operator pinned the count, and the
 * last measured start-up. A gateway without autoscaled models exports none.
 */
import { Counter, type Registry } from "prom-client";
import { oncePerRun, scrapeGauge } from "./fleet-collector.ts";
import { AUTOSCALE_REASONS, type AutoscaleReason, FLEET } from "./names.ts";

/** One autoscaled model at one instant. */
interface AutoscalerSeriesInput {
  model: string;
  pinned: boolean;
  /** Replicas placed and not leaving at the last decision. */
  current: number;
  /** What the law asked at the last decision (undefined: none taken yet). */
  asked: number | undefined;
  /** The last measured start-up, seconds (undefined: none yet). */
  startupSeconds: number | undefined;
  reasons: ReadonlyMap<AutoscaleReason, number>;
}

export function registerAutoscalerCollector(registry: Registry, read: () => readonly AutoscalerSeriesInput[]): void {
  const models = oncePerRun(read);
  new Counter<"model" | "reason">({
    name: FLEET.autoscalerDecisions.name,
    help: FLEET.autoscalerDecisions.help,
    labelNames: FLEET.autoscalerDecisions.labels,
    registers: [registry],
    collect() {
      this.reset();
      for (const m of models()) for (const reason of AUTOSCALE_REASONS) this.inc({ model: m.model, reason }, m.reasons.get(reason) ?? 0);
    },
  });
  const gauge = (d: { name: string; help: string; labels: readonly "model"[] }, value: (m: AutoscalerSeriesInput) => number | undefined) =>
    scrapeGauge(registry, d, models, (g, all) => {
      for (const m of all) {
        const v = value(m);
        if (v !== undefined) g.set({ model: m.model }, v);
      }
    });
  gauge(FLEET.autoscalerAsked, (m) => m.asked);
  gauge(FLEET.autoscalerCurrent, (m) => m.current);
  gauge(FLEET.autoscalerPinned, (m) => (m.pinned ? 1 : 0));
  gauge(FLEET.autoscalerStartup, (m) => m.startupSeconds);
}
