/**
 * The health worker's logic (workers/health.ts is its thin shell): runs the
 * engine and DCGM pollers and writes what they learn into the shared endpoint
 * table — readiness, load, KV usage, metric age, GPU faults — telling the main
 * thread by message only what does not fit in the table (model lists). It
 * also polls the fleet's node agents and posts every poll to the main thread.
 */
import type { Config } from "../config/types.ts";
import type { AgentPollSettings, FromHealth, PolledAgent, PolledEndpoint } from "../protocol/health-messages.ts";
import { AgentPoller } from "./agent-poller.ts";
import { EndpointTable, F, FLAVOR_CODES, I } from "../shared/endpoint-table.ts";
import type { AssessedGpu, DcgmSnapshot } from "./dcgm-poller.ts";
import { DcgmPoller } from "./dcgm-poller.ts";
import { EndpointPoller, type EndpointSnapshot } from "./endpoint-poller.ts";

/** Whether an endpoint watching `gpuIds` ([] = all) has a faulted GPU in this exporter's scrape. */
export function endpointGpuFaulted(gpus: readonly AssessedGpu[], gpuIds: readonly string[]): boolean {
  return gpus.some(
    (g) => g.assessment.faulted && (gpuIds.length === 0 || gpuIds.includes(g.sample.uuid) || (g.sample.gpu !== undefined && gpuIds.includes(String(g.sample.gpu)))),
  );
}

export function writeSnapshot(table: EndpointTable, row: number, s: EndpointSnapshot): void {
  table.setInt(row, I.HEALTHY, s.healthy ? 1 : 0);
  table.setInt(row, I.READY, s.ready ? 1 : 0);
  table.setInt(row, I.POLL_FAILURES, s.consecutiveFailures);
  table.setFloat(row, F.POLL_MS, s.pollMs);
  const m = s.metrics;
  if (m && s.metricsAt !== undefined) {
    table.setInt(row, I.WAITING, m.waiting ?? -1);
    table.setInt(row, I.RUNNING, m.running ?? -1);
    table.setFloat(row, F.KV_USAGE, m.kvUsage ?? NaN);
    table.setFloat(row, F.METRICS_AT, s.metricsAt);
    table.setInt(row, I.FLAVOR, Math.max(0, FLAVOR_CODES.indexOf(m.flavor)));
  }
}

export class HealthService {
  private readonly engines: EndpointPoller;
  private readonly dcgm: DcgmPoller | undefined;
  private readonly lastModels: (string | undefined)[];
  private readonly lastReady: (boolean | undefined)[];
  private agents: { poller: AgentPoller; settings: AgentPollSettings } | undefined;
  private started = false;

  constructor(
    private readonly table: EndpointTable,
    private readonly endpoints: readonly PolledEndpoint[],
    private readonly health: Config["health"],
    private readonly post: (msg: FromHealth) => void,
  ) {
    this.lastModels = endpoints.map(() => undefined);
    this.lastReady = endpoints.map(() => undefined);
    const opts = { intervalMs: health.pollIntervalMs, timeoutMs: health.timeoutMs, staleAfterMs: health.staleAfterMs };
    this.engines = new EndpointPoller(
      endpoints.map((e) => ({ index: e.index, id: e.id, url: e.url, engine: e.engine, ...(e.models ? { models: e.models } : {}) })),
      opts,
      (row, snap) => this.onEngine(row, snap),
    );
    // One poller target per distinct exporter URL; endpoints sharing a node share its scrape.
    const urls = [...new Set(endpoints.flatMap((e) => (e.dcgmUrl ? [e.dcgmUrl] : [])))];
    this.dcgm =
      urls.length === 0
        ? undefined
        : new DcgmPoller(
            urls.map((url, i) => ({ index: i, id: url, url })),
            opts,
            (i, snap) => this.onDcgm(urls[i]!, snap),
          );
  }

  start(): void {
    this.started = true;
    this.engines.start();
    this.dcgm?.start();
    this.agents?.poller.start();
  }

  async stop(): Promise<void> {
    this.started = false;
    await Promise.all([this.engines.stop(), this.dcgm?.stop(), this.agents?.poller.stop()]);
  }

  /** Poll these node agents from now on (the list replaces the previous one). */
  setAgents(agents: readonly PolledAgent[], settings: AgentPollSettings): void {
    const current = this.agents;
    if (!current || current.settings.intervalMs !== settings.intervalMs || current.settings.timeoutMs !== settings.timeoutMs) {
      void current?.poller.stop();
      const poller = new AgentPoller(
        { ...settings, staleAfterMs: this.health.staleAfterMs },
        (node, snapshot) => this.post({ type: "agent", node, snapshot }),
      );
      this.agents = { poller, settings: { ...settings } };
      if (this.started) poller.start();
    }
    this.agents!.poller.setTargets(agents);
  }

  private onEngine(row: number, snap: EndpointSnapshot): void {
    writeSnapshot(this.table, row, snap);
    if (snap.loadedModels) {
      const key = snap.loadedModels.join("\n");
      if (key !== this.lastModels[row]) {
        this.lastModels[row] = key;
        this.post({ type: "models", index: row, models: [...snap.loadedModels] });
      }
    }
    if (snap.ready !== this.lastReady[row]) {
      this.lastReady[row] = snap.ready;
      this.post({ type: "readiness", index: row, ready: snap.ready, healthy: snap.healthy, error: snap.lastError });
    }
  }

  private onDcgm(url: string, snap: DcgmSnapshot): void {
    // A stale scrape is no evidence either way: keep the last verdict until it
    // is stale, then stop holding endpoints out on old news.
    for (const e of this.endpoints) {
      if (e.dcgmUrl !== url) continue;
      const faulted = !snap.stale && endpointGpuFaulted(snap.gpus, e.gpuIds);
      this.table.setInt(e.index, I.GPU_FAULTED, faulted ? 1 : 0);
    }
  }
}
