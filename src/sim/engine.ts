/**
 * The served engine: the clockless core (engine-core.ts) driven by the wall
 * clock through one timer. The engine's clock is the wall clock × the time
 * scale (`--time-scale`), so every time the engine itself reports (its
 * /metrics histograms, /sim/state) is in simulated milliseconds, while a
 * step of S simulated ms takes S / scale on the wall.
 */
import type { KvCacheEvent } from "../engines/kv-events/model.ts";
import { DEFAULT_MAX_NUM_BATCHED_TOKENS, type SimLiveConfig, type SimStaticConfig, stepTimingOf } from "./config.ts";
import { EngineClock } from "./engine-clock.ts";
import { type CoreTiming, EngineCore } from "./engine-core.ts";
import type { EngineStats } from "./engine-stats.ts";
import type { KvCache } from "./kv-cache.ts";
import type { SeqRequest, Sequence } from "./sequence.ts";
import { stepShares } from "./step-time.ts";

export type { SeqSink } from "./sequence.ts";

/** DCGM's utilisation window: NVML samples over up to a second. */
const UTILIZATION_WINDOW_MS = 1_000;

/**
 * The core of an engine with these settings: the served engine's, and the
 * fleet twin's on its virtual clock. Timing is read through `live` at every
 * step (POST /sim/config may change it). `minStepMs`: the shortest step
 * (Infinity: none).
 */
export function engineCore(fixed: SimStaticConfig, live: SimLiveConfig, random: () => number, minStepMs: number): EngineCore {
  const view: CoreTiming = {
    get timing() {
      return stepTimingOf(live, fixed.maxNumSeqs).timing;
    },
    get jitter() {
      return live.jitter;
    },
    get frontendJitterMs() {
      return live.frontendJitterMs ?? 0;
    },
    get frontend() {
      return stepTimingOf(live, fixed.maxNumSeqs).frontend;
    },
    get firstTokenDelayMs() {
      return stepTimingOf(live, fixed.maxNumSeqs).firstTokenDelayMs;
    },
  };
  const config = {
    maxNumSeqs: fixed.maxNumSeqs,
    maxNumBatchedTokens: fixed.maxNumBatchedTokens ?? DEFAULT_MAX_NUM_BATCHED_TOKENS,
    numGpuBlocks: fixed.numGpuBlocks,
    blockSize: fixed.blockSize,
    maxModelLen: fixed.maxModelLen,
    kvEvents: fixed.kvEvents !== undefined,
    asyncScheduling: fixed.asyncScheduling === true,
    ...(fixed.lora ? { maxLoras: fixed.lora.maxLoras } : {}),
  };
  return new EngineCore(config, view, random, minStepMs);
}

export class Engine {
  readonly core: EngineCore;
  private readonly scale: number;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Infinity;
  private stopped = false;
  /** How well the engine kept its schedule on this host: how late its timer ran, how far its steps slipped (wall ms). */
  readonly clock = new EngineClock();
  /** Where each step's KV-cache events go (the ZMQ publisher), when the engine records them. */
  onKvEvents: ((events: KvCacheEvent[]) => void) | undefined;

  constructor(
    fixed: SimStaticConfig,
    private readonly live: SimLiveConfig,
    private readonly wallClock: () => number = () => performance.now(),
    random: () => number = Math.random,
  ) {
    this.scale = fixed.timeScale ?? 1;
    // On a real-time clock a step lasts at least a millisecond: one step per timer callback, as the engine's own loop would.
    this.core = engineCore(fixed, live, random, this.scale <= 1 ? 1 : Infinity);
    this.core.onSlip = (ms) => this.clock.noteSlip(ms / this.scale);
  }

  get kv(): KvCache {
    return this.core.kv;
  }

  get stats(): EngineStats {
    return this.core.stats;
  }

  /** Requests holding a batch slot (prefilling, decoding, or held by a fault). */
  get runningCount(): number {
    return this.core.runningCount;
  }

  get waitingCount(): number {
    return this.core.waitingCount;
  }

  /** The engine's clock, simulated ms. */
  now(): number {
    return this.wallClock() * this.scale;
  }

  submit(req: SeqRequest): Sequence {
    const s = this.core.submit(req, this.now());
    this.schedule();
    return s;
  }

  /** The client went away (or the server ends it): free its blocks at once. */
  abort(s: Sequence, disconnect: boolean): void {
    this.core.abort(s, disconnect, this.now());
    this.schedule();
  }

  /** vLLM's reset_prefix_cache: false (nothing done) while requests hold blocks. */
  resetPrefixCache(): boolean {
    const done = this.core.kv.resetPrefixCache();
    this.flushKvEvents();
    return done;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** The last step's length in simulated ms, for /sim/state. */
  stepMs(): number {
    return this.core.currentStepMs;
  }

  /** Fraction of the last second (simulated) in which a step ran, 0..1. */
  utilization(): number {
    return this.core.busy.utilization(this.now(), UTILIZATION_WINDOW_MS);
  }

  /** What the last step kept busy, for DCGM's tensor and DRAM activity (absent without a derived model). */
  lastStepShares(): { memory: number; compute: number } | undefined {
    const c = this.core.lastStep;
    return c && this.live.derived ? stepShares(this.live.derived, c) : undefined;
  }

  /** One batch per step, as vLLM's scheduler publishes what its block pool queued during the step. */
  private flushKvEvents(): void {
    const events = this.core.kv.takeEvents();
    if (events.length > 0) this.onKvEvents?.(events);
  }

  private schedule(): void {
    if (this.stopped) return;
    const at = this.core.nextEventAt();
    if (at >= this.timerAt) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (at === Infinity) {
      this.timer = undefined;
      this.timerAt = Infinity;
      return;
    }
    this.timerAt = at;
    this.timer = setTimeout(this.loop, Math.max(0, (at - this.now()) / this.scale));
  }

  private readonly loop = (): void => {
    const due = this.timerAt;
    this.timer = undefined;
    this.timerAt = Infinity;
    if (this.stopped) return;
    const now = this.now();
    this.clock.noteLate((now - due) / this.scale);
    try {
      this.core.advance(now);
      this.flushKvEvents();
    } finally {
      // Whatever a sink did, the next event keeps its timer.
      this.schedule();
    }
  };
}
