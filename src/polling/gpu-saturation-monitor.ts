/**
 * Sustained GPU saturation in the health worker: polls the
 * gpu_health sources' dcgm-exporters every gpu_health.poll_interval_ms, feeds
 * each scrape into the per-GPU rings (PoolSaturationTracker) and publishes,
 * per pool, until when it is saturated into the shared GpuSaturationTable,
 * which the shed gate and the batch runner read without a message. Sources
 * are the configured ones or, without any, every polled endpoint's dcgm_url
 * for that endpoint's pool — fleet replicas included as they come and go.
 */
import type { GpuHealthConfig } from "../config/types.ts";
import { type GpuSaturationView, PoolSaturationTracker, type SaturationSource } from "../gpuhealth/gpu-saturation.ts";
import type { GpuSaturationTable } from "../shared/gpu-saturation-table.ts";
import { DcgmPoller, type DcgmSnapshot } from "./dcgm-poller.ts";
import type { FetchFn } from "./probe.ts";

/** What the monitor needs of a polled endpoint. */
export interface SaturationEndpoint {
  index: number;
  pool: string;
  /** The pool's row in the shared tables. */
  poolRow: number;
  dcgmUrl: string | undefined;
  gpuIds: readonly string[];
}

interface GpuSaturationMonitorOptions {
  /** Per scrape (health.timeout_ms). */
  timeoutMs: number;
  fetch?: FetchFn;
}

function sourceKey(s: SaturationSource): string {
  return `${s.pool}\u0000${s.url}\u0000${[...s.gpuIds].sort().join(",")}`;
}

export class GpuSaturationMonitor {
  readonly #cfg: GpuHealthConfig;
  readonly #table: GpuSaturationTable;
  readonly #tracker: PoolSaturationTracker;
  readonly #poller: DcgmPoller;
  /** Exporter URL → its poller slot; slot → URL. */
  readonly #slotOf = new Map<string, number>();
  readonly #urlOf = new Map<number, string>();
  #nextSlot = 0;
  /** The sources watched now, by key. */
  #sources = new Map<string, SaturationSource>();
  readonly #endpoints = new Map<number, SaturationEndpoint>();
  /** Pool name → its row, learned from the endpoints (a pool nobody serves has no reader). */
  readonly #poolRows = new Map<string, number>();

  constructor(cfg: GpuHealthConfig, table: GpuSaturationTable, opts: GpuSaturationMonitorOptions) {
    this.#cfg = cfg;
    this.#table = table;
    this.#tracker = new PoolSaturationTracker(cfg);
    this.#poller = new DcgmPoller(
      [],
      { intervalMs: cfg.pollIntervalMs, timeoutMs: opts.timeoutMs, staleAfterMs: cfg.staleAfterMs, fetch: opts.fetch },
      (slot, snap) => this.#onScrape(slot, snap),
    );
    if (!cfg.sourcesFromEndpoints) this.#setSources(cfg.sources);
  }

  /** An endpoint is polled (or changed): its pool gets a row, and its exporter is watched when sources come from endpoints. */
  setEndpoint(e: SaturationEndpoint): void {
    this.#endpoints.set(e.index, e);
    this.#poolRows.set(e.pool, e.poolRow);
    if (this.#cfg.sourcesFromEndpoints) this.#setSources(this.#endpointSources());
  }

  removeEndpoint(index: number): void {
    if (!this.#endpoints.delete(index)) return;
    if (this.#cfg.sourcesFromEndpoints) this.#setSources(this.#endpointSources());
  }

  start(): void {
    this.#poller.start();
  }

  stop(): Promise<void> {
    return this.#poller.stop();
  }

  /** Poll every exporter once and publish (tests). */
  pollOnce(): Promise<void> {
    return this.#poller.pollOnce();
  }

  view(): GpuSaturationView[] {
    return this.#tracker.view(Date.now());
  }

  #endpointSources(): SaturationSource[] {
    const out: SaturationSource[] = [];
    for (const e of this.#endpoints.values()) if (e.dcgmUrl !== undefined) out.push({ url: e.dcgmUrl.replace(/\/+$/, ""), pool: e.pool, gpuIds: e.gpuIds });
    return out;
  }

  /** Watch exactly these sources: new exporters are polled, ones nobody reads any more are dropped with their GPUs. */
  #setSources(list: readonly SaturationSource[]): void {
    const next = new Map(list.map((s) => [sourceKey(s), s]));
    for (const [key, s] of this.#sources) if (!next.has(key)) this.#tracker.forget(s);
    this.#sources = next;
    const urls = new Set(list.map((s) => s.url));
    for (const [url, slot] of this.#slotOf) {
      if (urls.has(url)) continue;
      this.#poller.remove(slot);
      this.#slotOf.delete(url);
      this.#urlOf.delete(slot);
    }
    for (const url of urls) {
      if (this.#slotOf.has(url)) continue;
      const slot = this.#nextSlot++;
      this.#slotOf.set(url, slot);
      this.#urlOf.set(slot, url);
      this.#poller.add({ index: slot, id: url, url });
    }
    this.#publish();
  }

  /** Every poll reports, failed ones too: the flags are republished each interval, so saturation ends on time. */
  #onScrape(slot: number, snap: DcgmSnapshot): void {
    const url = this.#urlOf.get(slot);
    if (url === undefined) return;
    for (const s of this.#sources.values()) if (s.url === url) this.#tracker.ingest(s, snap.gpus, snap.sampledAt);
    this.#publish();
  }

  #publish(): void {
    // Date.now(): the clock of the scrapes' sampledAt and of every reader.
    const now = Date.now();
    for (const [pool, row] of this.#poolRows) this.#table.publish(row, this.#tracker.saturatedUntil(pool, now));
  }
}
