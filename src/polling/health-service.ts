/**
 * The health worker's logic (workers/health.ts is its thin shell): runs the
 * engine and DCGM pollers and writes what they learn into the shared endpoint
 * table — readiness, load, KV usage, metric age, GPU faults — telling the main
 * thread by message what does not fit in the table (model lists, the GPUs
 * each DCGM exporter reports, the end of the first engine poll round). It
 * also polls the fleet's node agents and posts every poll to the main thread,
 * and, with a gpu_health block, keeps the per-GPU saturation rings and
 * publishes each pool's sustained saturation in shared memory.
 */
import type { Config, GpuHealthConfig } from "../config/types.ts";
import type { AgentPollSettings, FromHealth, PolledAgent, PolledEndpoint } from "../protocol/health-messages.ts";
import { type EndpointTable, F, FLAVOR_CODES, I, S, type Signals } from "../shared/endpoint-table.ts";
import type { GpuSaturationTable } from "../shared/gpu-saturation-table.ts";
import { AdapterNames, type LoraTable } from "../shared/lora-table.ts";
import { AgentPoller } from "./agent-poller.ts";
import type { AssessedGpu, DcgmSnapshot } from "./dcgm-poller.ts";
import { DcgmPoller } from "./dcgm-poller.ts";
import { EndpointPoller, type EndpointSnapshot } from "./endpoint-poller.ts";
import { gpuReport } from "./gpu-reports.ts";
import { GpuSaturationMonitor } from "./gpu-saturation-monitor.ts";

/** Whether an endpoint watching `gpuIds` ([] = all) has a faulted GPU in this exporter's scrape. */
function endpointGpuFaulted(gpus: readonly AssessedGpu[], gpuIds: readonly string[]): boolean {
  return gpus.some(
    (g) =>
      g.assessment.faulted && (gpuIds.length === 0 || gpuIds.includes(g.sample.uuid) || (g.sample.gpu !== undefined && gpuIds.includes(String(g.sample.gpu)))),
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

/**
 * One poll's LoRA state into the endpoint's row of the LoRA table: the
 * adapters /v1/models lists (kept when it did not answer), and from
 * vllm:lora_requests_info the running and waiting adapters and max_loras
 * (cleared when the engine reports none). New names are numbered into
 * `fresh` for the main thread.
 */
export function writeLora(lora: LoraTable, names: AdapterNames, row: number, s: EndpointSnapshot, fresh: [string, number][]): void {
  const ids = (list: readonly string[]) => list.map((n) => names.idOf(n, fresh)).filter((id): id is number => id !== undefined);
  if (s.adapters) lora.setAdapters(row, "registered", ids(s.adapters.map((a) => a.name)));
  const info = s.metrics?.lora;
  if (info && s.metricsAt !== undefined) {
    const running = ids(info.running);
    lora.setAdapters(row, "running", running);
    // Running adapters hold slots: the front of the engine's slot LRU (least recent of them first, so the engine's first stays first).
    for (let i = running.length - 1; i >= 0; i--) lora.touch(row, running[i]!);
    lora.setAdapters(row, "waiting", ids(info.waiting));
    lora.setState(row, info.maxLoras, new Set([...info.running, ...info.waiting]).size);
  } else if (s.metrics) {
    lora.setAdapters(row, "running", []);
    lora.setAdapters(row, "waiting", []);
    lora.setState(row, undefined, 0);
  }
}

export class HealthService {
  private readonly engines: EndpointPoller;
  private readonly dcgm: DcgmPoller;
  private readonly endpoints = new Map<number, PolledEndpoint>();
  private readonly lastModels = new Map<number, string>();
  private readonly lastReady = new Map<number, boolean>();
  /** dcgm-exporter URL → its poller index, while some endpoint uses it. */
  private readonly dcgmTargets = new Map<string, number>();
  private nextDcgmIndex = 0;
  /**
   * Slots of the endpoints present at start not polled yet; "engines-polled"
   * goes out once none is left (the metrics listener answers 503 until then),
   * then this is undefined. An endpoint removed before its first poll is no
   * longer waited for, or the gateway would answer 503 for ever; endpoints
   * added later (fleet replicas) are not waited for at all.
   */
  private firstRound: Set<number> | undefined;
  private agents: { poller: AgentPoller; settings: AgentPollSettings } | undefined;
  private started = false;
  private readonly saturation: GpuSaturationMonitor | undefined;
  private readonly adapterNames = new AdapterNames();

  constructor(
    private readonly table: EndpointTable,
    endpoints: readonly PolledEndpoint[],
    private readonly health: Config["health"],
    private readonly post: (msg: FromHealth) => void,
    /** Bumped after every engine poll written, so the scheduler worker recomputes its flow limits at once. */
    private readonly signals?: Signals,
    /** gpu_health: sustained saturation per pool, published into `table`. */
    gpu?: { config: GpuHealthConfig; table: GpuSaturationTable },
    /** LoRA adapters per endpoint, published for the choosers. */
    private readonly lora?: LoraTable,
  ) {
    const opts = {
      intervalMs: health.pollIntervalMs,
      timeoutMs: health.timeoutMs,
      staleAfterMs: health.staleAfterMs,
      timeoutsBeforeUnready: health.timeoutsBeforeUnready,
    };
    this.saturation = gpu === undefined ? undefined : new GpuSaturationMonitor(gpu.config, gpu.table, { timeoutMs: health.timeoutMs });
    this.engines = new EndpointPoller([], opts, (row, snap) => this.onEngine(row, snap));
    this.dcgm = new DcgmPoller([], opts, (i, snap) => this.onDcgm(i, snap));
    for (const e of endpoints) this.add(e);
    this.firstRound = new Set(endpoints.map((e) => e.index));
  }

  /** Start polling an endpoint in its slot (replacing what was there). */
  add(e: PolledEndpoint): void {
    this.remove(e.index);
    this.lora?.resetRow(e.index);
    this.endpoints.set(e.index, e);
    this.engines.add({
      index: e.index,
      id: e.id,
      url: e.url,
      engine: e.engine,
      staticModels: e.staticModels,
      ...(e.models ? { models: e.models } : {}),
      ...(e.headers ? { headers: e.headers } : {}),
    });
    this.saturation?.setEndpoint(e);
    // One poller target per distinct exporter URL; endpoints sharing a node share its scrape.
    if (e.dcgmUrl && !this.dcgmTargets.has(e.dcgmUrl)) {
      const index = this.nextDcgmIndex++;
      this.dcgmTargets.set(e.dcgmUrl, index);
      this.dcgm.add({ index, id: e.dcgmUrl, url: e.dcgmUrl });
    }
  }

  /** Stop polling the endpoint of a slot; a poll in flight reports nothing. */
  remove(index: number): void {
    const e = this.endpoints.get(index);
    if (!e) return;
    this.endpoints.delete(index);
    this.engines.remove(index);
    this.saturation?.removeEndpoint(index);
    this.lastModels.delete(index);
    this.lastReady.delete(index);
    this.polled(index);
    if (e.dcgmUrl && ![...this.endpoints.values()].some((o) => o.dcgmUrl === e.dcgmUrl)) {
      const i = this.dcgmTargets.get(e.dcgmUrl);
      if (i !== undefined) this.dcgm.remove(i);
      this.dcgmTargets.delete(e.dcgmUrl);
    }
  }

  start(): void {
    this.started = true;
    if (this.firstRound?.size === 0) this.enginesPolled();
    this.engines.start();
    this.dcgm.start();
    this.saturation?.start();
    this.agents?.poller.start();
  }

  async stop(): Promise<void> {
    this.started = false;
    await Promise.all([this.engines.stop(), this.dcgm.stop(), this.saturation?.stop(), this.agents?.poller.stop()]);
  }

  /** Poll these node agents from now on (the list replaces the previous one). */
  setAgents(agents: readonly PolledAgent[], settings: AgentPollSettings): void {
    const current = this.agents;
    if (!current || current.settings.intervalMs !== settings.intervalMs || current.settings.timeoutMs !== settings.timeoutMs) {
      void current?.poller.stop();
      const poller = new AgentPoller({ ...settings, staleAfterMs: this.health.staleAfterMs }, (node, snapshot) => this.post({ type: "agent", node, snapshot }));
      this.agents = { poller, settings: { ...settings } };
      if (this.started) poller.start();
    }
    this.agents!.poller.setTargets(agents);
  }

  private onEngine(row: number, snap: EndpointSnapshot): void {
    writeSnapshot(this.table, row, snap);
    if (this.lora) {
      const fresh: [string, number][] = [];
      writeLora(this.lora, this.adapterNames, row, snap, fresh);
      if (fresh.length > 0) this.post({ type: "adapter-ids", names: fresh });
    }
    this.signals?.bump(S.METRICS_EPOCH);
    if (snap.loadedModels) {
      const adapters = snap.adapters ?? [];
      const key = `${snap.loadedModels.join("\n")}\u0000${adapters.map((a) => `${a.name}\u0001${a.parent}`).join("\n")}`;
      if (key !== this.lastModels.get(row)) {
        this.lastModels.set(row, key);
        this.post({ type: "models", index: row, models: [...snap.loadedModels], adapters: adapters.map((a) => ({ ...a })) });
      }
    }
    if (snap.ready !== this.lastReady.get(row)) {
      this.lastReady.set(row, snap.ready);
      this.post({ type: "readiness", index: row, ready: snap.ready, healthy: snap.healthy, error: snap.lastError });
    }
    this.polled(row);
  }

  /** A slot of the first round was polled (or left): maybe the round is over. */
  private polled(row: number): void {
    if (!this.firstRound?.delete(row)) return;
    if (this.firstRound.size === 0 && this.started) this.enginesPolled();
  }

  private enginesPolled(): void {
    this.firstRound = undefined;
    this.post({ type: "engines-polled" });
  }

  private onDcgm(index: number, snap: DcgmSnapshot): void {
    // Only fresh scrapes go to the main thread: a failed one changes nothing
    // there, where the age of the last good one (sampledAt) decides at scrape
    // time whether its GPUs are still exported.
    const url = [...this.dcgmTargets].find(([, i]) => i === index)?.[0];
    if (url !== undefined && snap.ok && snap.sampledAt !== undefined)
      this.post({ type: "gpus", url, sampledAt: snap.sampledAt, gpus: snap.gpus.map(gpuReport) });
    // A stale scrape is no evidence either way: keep the last verdict until it
    // is stale, then stop holding endpoints out on old news.
    for (const e of this.endpoints.values()) {
      if (e.dcgmUrl === undefined || this.dcgmTargets.get(e.dcgmUrl) !== index) continue;
      const faulted = !snap.stale && endpointGpuFaulted(snap.gpus, e.gpuIds);
      this.table.setInt(e.index, I.GPU_FAULTED, faulted ? 1 : 0);
    }
  }
}
