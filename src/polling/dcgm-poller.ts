/**
 * Polls dcgm-exporter endpoints and reports, per exporter, every GPU sample
 * with its fault/saturation verdict. The last good scrape is kept with its
 * time when a later one fails: the caller decides how long to trust it.
 */
import { assessGpu, type GpuAssessment, type GpuThresholds } from "../gpuhealth/assess.ts";
import { type GpuSample, parseDcgmExport } from "../gpuhealth/dcgm.ts";
import { type FetchFn, probe } from "./probe.ts";
import { isStale } from "./readiness.ts";
import { TargetPoller } from "./target-poller.ts";

interface DcgmTarget {
  /** Slot passed back to onSnapshot. */
  index: number;
  id: string;
  /** Scrape URL; a bare origin (path "/") gets dcgm-exporter's default "/metrics". */
  url: string;
}

interface DcgmPollerOptions {
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

type OnDcgmSnapshot = (index: number, snapshot: DcgmSnapshot) => void;

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

export class DcgmPoller extends TargetPoller<DcgmTarget, DcgmSnapshot> {
  private readonly options: DcgmPollerOptions;

  constructor(targets: readonly DcgmTarget[], options: DcgmPollerOptions, onSnapshot: OnDcgmSnapshot) {
    super(
      targets.map((t) => ({ ...t, url: dcgmScrapeUrl(t.url) })),
      options,
      INITIAL,
      onSnapshot,
    );
    this.options = { ...options };
  }

  protected async pollTarget(target: DcgmTarget, prev: Readonly<DcgmSnapshot>, signal: AbortSignal): Promise<DcgmSnapshot | undefined> {
    const startedAt = Date.now();
    const res = await probe(this.fetchFn, target.url, this.options.timeoutMs, signal, "GET dcgm /metrics");
    if (signal.aborted) return undefined;
    const finishedAt = Date.now();
    let snap: DcgmSnapshot;
    if (res.ok) {
      const parsed = parseDcgmExport(res.body);
      snap = {
        ok: true,
        gpus: parsed.gpus.map((sample) => ({ sample, assessment: assessGpu(sample, this.options.thresholds) })),
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
        stale: isStale(prev.sampledAt, finishedAt, this.options.staleAfterMs),
        consecutiveFailures: prev.consecutiveFailures + 1,
        lastError: res.error,
        pollMs: finishedAt - startedAt,
      };
    }
    return snap;
  }
}
