/**
 * Polls dcgm-exporter endpoints and reports, per exporter, every GPU sample
 * with its fault/saturation verdict. The last good scrape is kept with its
 * time when a later one fails: the caller decides how long to trust it.
 */
import { assessGpu, type GpuAssessment, type GpuThresholds } from "../gpuhealth/assess.ts";
import { parseDcgmExport, type GpuSample } from "../gpuhealth/dcgm.ts";
import { PollLoop } from "./poll-loop.ts";
import { probe, type FetchFn } from "./probe.ts";
import { isStale } from "./readiness.ts";

export interface DcgmTarget {
  /** Slot passed back to onSnapshot. */
  index: number;
  id: string;
  /** Scrape URL; a bare origin (path "/") gets dcgm-exporter's default "/metrics". */
  url: string;
}

export interface DcgmPollerOptions {
  intervalMs: number;
  timeoutMs: number;
  staleAfterMs: number;
  thresholds?: Partial<GpuThresholds>;
  fetch?: FetchFn;
}

export interface AssessedGpu {
  sample: GpuSample;
  assessment: GpuAssessment;
}

export interface DcgmSnapshot {
  /** The latest scrape succeeded. */
  ok: boolean;
  /** GPUs of the last good scrape (empty until one succeeds). */
  gpus: AssessedGpu[];
  /** Date.now() of the last good scrape. */
  sampledAt: number | undefined;
  /** sampledAt missing or older than staleAfterMs. */
  stale: boolean;
  /** DCGM series without a UUID in the last good scrape. */
  unattributed: number;
  consecutiveFailures: number;
  lastError: string | undefined;
  pollMs: number;
}

export type OnDcgmSnapshot = (index: number, snapshot: DcgmSnapshot) => void;

const INITIAL: Readonly<DcgmSnapshot> = Object.freeze({
  ok: false,
  gpus: [],
  sampledAt: undefined,
  stale: true,
  unattributed: 0,
  consecutiveFailures: 0,
  lastError: undefined,
  pollMs: 0,
});

export function dcgmScrapeUrl(url: string): string {
  const u = new URL(url);
  if (u.pathname === "/" || u.pathname === "") u.pathname = "/metrics";
  return u.toString();
}

export class DcgmPoller {
  readonly #targets: readonly DcgmTarget[];
  readonly #options: DcgmPollerOptions;
  readonly #fetch: FetchFn;
  readonly #onSnapshot: OnDcgmSnapshot;
  readonly #snapshots: DcgmSnapshot[];
  readonly #loop: PollLoop;

  constructor(targets: readonly DcgmTarget[], options: DcgmPollerOptions, onSnapshot: OnDcgmSnapshot) {
    if (!(options.timeoutMs > 0)) throw new RangeError(`timeoutMs must be > 0, got ${options.timeoutMs}`);
    this.#targets = targets.map((t) => ({ ...t, url: dcgmScrapeUrl(t.url) }));
    this.#options = { ...options };
    this.#fetch = options.fetch ?? ((url, init) => fetch(url, init));
    this.#onSnapshot = onSnapshot;
    this.#snapshots = targets.map(() => ({ ...INITIAL }));
    this.#loop = new PollLoop(targets.length, options.intervalMs, (position, signal) => this.#poll(position, signal));
  }

  start(): void {
    this.#loop.start();
  }

  stop(): Promise<void> {
    return this.#loop.stop();
  }

  pollOnce(): Promise<void> {
    return this.#loop.pollOnce();
  }

  snapshot(index: number): DcgmSnapshot | undefined {
    const position = this.#targets.findIndex((t) => t.index === index);
    return position < 0 ? undefined : this.#snapshots[position];
  }

  async #poll(position: number, signal: AbortSignal): Promise<void> {
    const target = this.#targets[position]!;
    const startedAt = Date.now();
    const res = await probe(this.#fetch, target.url, this.#options.timeoutMs, signal, "GET dcgm /metrics");
    if (signal.aborted) return;
    const finishedAt = Date.now();
    const prev = this.#snapshots[position]!;
    let snap: DcgmSnapshot;
    if (res.ok) {
      const parsed = parseDcgmExport(res.body);
      snap = {
        ok: true,
        gpus: parsed.gpus.map((sample) => ({ sample, assessment: assessGpu(sample, this.#options.thresholds) })),
        sampledAt: finishedAt,
        stale: false,
        unattributed: parsed.unattributed,
        consecutiveFailures: 0,
        lastError: undefined,
        pollMs: finishedAt - startedAt,
      };
    } else {
      snap = {
        ...prev,
        ok: false,
        stale: isStale(prev.sampledAt, finishedAt, this.#options.staleAfterMs),
        consecutiveFailures: prev.consecutiveFailures + 1,
        lastError: res.error,
        pollMs: finishedAt - startedAt,
      };
    }
    this.#snapshots[position] = snap;
    this.#onSnapshot(target.index, snap);
  }
}
