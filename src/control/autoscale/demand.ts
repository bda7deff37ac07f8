/**
 * What the gateway sees of each autoscaled model's requests between two
 * decisions: arrivals, requests in flight, each first token's TTFT, each
 * finished stream's mean inter-token time, and prompt tokens. The request
 * path writes it (a counter and at most a push per event, on the main
 * thread); the autoscaler takes it once per interval. Only watched models
 * are collected, and each window keeps at most MAX_WINDOW_SAMPLES latencies
 * (the latest), so an unread window cannot grow without bound. With several
 * gateways, followers publish their windows and the leader merges them into
 * its own (PeerDemand).
 */

/** One model's requests since the window was last taken. */
export interface DemandWindow {
  arrivals: number;
  /** Requests in flight now (admission and engines). */
  inflight: number;
  ttftMs: number[];
  itlMs: number[];
  /** Prompt tokens of the requests that arrived in the window (the gateway's estimate, as admission and quotas take it). */
  promptTokens: number;
}

/** Latencies a window keeps; beyond it the oldest are overwritten. */
const MAX_WINDOW_SAMPLES = 4_096;

/** A bounded sample: the latest MAX_WINDOW_SAMPLES values pushed. */
class LatestSamples {
  private values: number[] = [];
  private pushed = 0;

  push(v: number): void {
    if (this.values.length < MAX_WINDOW_SAMPLES) this.values.push(v);
    else this.values[this.pushed % MAX_WINDOW_SAMPLES] = v;
    this.pushed++;
  }

  take(): number[] {
    const out = this.values;
    this.values = [];
    this.pushed = 0;
    return out;
  }
}

/** One model's demand, written by the request path. */
export class ModelDemand {
  private arrivals = 0;
  private inflight = 0;
  private promptTokens = 0;
  private readonly ttft = new LatestSamples();
  private readonly itl = new LatestSamples();

  arrived(): void {
    this.arrivals++;
    this.inflight++;
  }

  /** The arrived request's prompt, as estimated. */
  prompt(tokens: number): void {
    if (tokens > 0) this.promptTokens += tokens;
  }

  firstToken(ttftMs: number): void {
    this.ttft.push(ttftMs);
  }

  /** A request ended; `tpotMs`: its mean inter-token time when it streamed more than one token. */
  finished(tpotMs: number | undefined): void {
    if (this.inflight > 0) this.inflight--;
    if (tpotMs !== undefined && Number.isFinite(tpotMs) && tpotMs >= 0) this.itl.push(tpotMs);
  }

  take(): DemandWindow {
    const w: DemandWindow = {
      arrivals: this.arrivals,
      inflight: this.inflight,
      ttftMs: this.ttft.take(),
      itlMs: this.itl.take(),
      promptTokens: this.promptTokens,
    };
    this.arrivals = 0;
    this.promptTokens = 0;
    return w;
  }
}

/** The watched models' demand, by the names requests use (a model, or one of its adapters, which its replicas serve). */
export class DemandSignals {
  private readonly byModel = new Map<string, ModelDemand>();
  private readonly byName = new Map<string, ModelDemand>();

  /** Collect for these models (each with the other names its requests arrive under); others are dropped. */
  watch(models: readonly { model: string; aliases: readonly string[] }[]): void {
    const keep = new Set(models.map((m) => m.model));
    for (const model of this.byModel.keys()) if (!keep.has(model)) this.byModel.delete(model);
    this.byName.clear();
    for (const m of models) {
      let d = this.byModel.get(m.model);
      if (!d) this.byModel.set(m.model, (d = new ModelDemand()));
      for (const name of [m.model, ...m.aliases]) if (!this.byName.has(name)) this.byName.set(name, d);
    }
  }

  /** The demand a request for `name` counts toward; undefined when its model is not watched. */
  of(name: string): ModelDemand | undefined {
    return this.byName.get(name);
  }

  /** Take the model's window (an unwatched model: an empty one). */
  take(model: string): DemandWindow {
    return this.byModel.get(model)?.take() ?? { arrivals: 0, inflight: 0, ttftMs: [], itlMs: [], promptTokens: 0 };
  }
}

/** A window another gateway published, and how long ago by the shared store's clock. */
export interface PeerWindow extends DemandWindow {
  gateway: string;
  model: string;
  ageMs: number;
}

/** The windows of the gateways that do not decide: followers publish theirs, the leader collects them (implemented over the shared store). */
export interface PeerDemand {
  /** Publish this gateway's window of `model` (a follower, each interval; never throws, never waits for the store). */
  publish(model: string, w: DemandWindow): void;
  /** Take every window published since the last collect (the leader, each decision); none when the store cannot be reached. */
  collect(): Promise<PeerWindow[]>;
}

/** Latencies of one published window, at most (the latest). */
export const MAX_PEER_SAMPLES = 256;

/**
 * The leader's window of a model with the followers' added: arrivals,
 * prompt tokens and latencies summed, and requests in flight as the latest
 * each follower published (a count now, not a count of events). A window
 * older than `maxAgeMs` (a follower that published and went away, or what a
 * former leader left uncollected) does not count.
 */
export function mergeWindows(own: DemandWindow, peers: readonly PeerWindow[], maxAgeMs: number): DemandWindow {
  const out: DemandWindow = { ...own, ttftMs: [...own.ttftMs], itlMs: [...own.itlMs] };
  const latest = new Map<string, PeerWindow>();
  for (const p of peers) {
    if (p.ageMs > maxAgeMs) continue;
    out.arrivals += p.arrivals;
    out.promptTokens += p.promptTokens;
    for (const v of p.ttftMs) out.ttftMs.push(v);
    for (const v of p.itlMs) out.itlMs.push(v);
    const seen = latest.get(p.gateway);
    if (!seen || p.ageMs < seen.ageMs) latest.set(p.gateway, p);
  }
  for (const p of latest.values()) out.inflight += p.inflight;
  return out;
}
