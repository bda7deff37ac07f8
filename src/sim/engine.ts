/**
 * The simulated engine core: continuous batching over a paged KV cache with
 * one scheduler loop, like a real engine step. Each iteration admits waiting
 * requests (FIFO, up to max-num-seqs, while KV blocks last), completes due
 * prefills (first token) and, when a decode step is due, gives every decoding
 * sequence one token. Transport is behind `SeqSink`; the engine never awaits.
 *
 * Timing model (documented in the README):
 *   prefill  = prefill_overhead_ms + prefill_ms_per_token × uncached prompt tokens
 *   step     = itl_ms × (1 + batch_slowdown × running / max_num_seqs) × (1 ± jitter)
 */
import type { SimLiveConfig, SimStaticConfig } from "./config.ts";
import { EngineStats } from "./engine-stats.ts";
import { KvCache } from "./kv-cache.ts";
import { Sequence, type SeqPhase, type SeqRequest } from "./sequence.ts";

export { Sequence, type SeqPhase, type SeqRequest, type SeqSink } from "./sequence.ts";

/** Read the phase afresh (TypeScript narrows a field across calls that change it). */
function phaseOf(s: Sequence): SeqPhase {
  return s.phase;
}

/** Timer slack: work due within this many ms is done in the current iteration. */
const SLACK_MS = 1;
const MIN_STEP_MS = 1;

export class Engine {
  readonly kv: KvCache;
  readonly stats: EngineStats;
  private running: Sequence[] = [];
  private runningLive = 0;
  private waiting: Sequence[] = [];
  private waitingHead = 0;
  private waitingLive = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Infinity;
  private nextStepAt = Infinity;
  private inLoop = false;
  private stopped = false;

  constructor(
    private readonly fixed: SimStaticConfig,
    private readonly live: SimLiveConfig,
    private readonly clock: () => number = () => performance.now(),
    private readonly random: () => number = Math.random,
  ) {
    this.kv = new KvCache(fixed.numGpuBlocks, fixed.blockSize);
    this.stats = new EngineStats(fixed.maxModelLen);
  }

  /** Requests holding a batch slot (prefill, decode or a stalled fault). */
  get runningCount(): number {
    return this.runningLive;
  }

  get waitingCount(): number {
    return this.waitingLive;
  }

  submit(req: SeqRequest): Sequence {
    const s = new Sequence(req, this.clock());
    this.stats.requestsTotal++;
    this.waiting.push(s);
    this.waitingLive++;
    this.wakeAt(s.arrivedAt);
    return s;
  }

  /** The client went away (or the server ends it): free its blocks at once. */
  abort(s: Sequence, disconnect: boolean): void {
    if (s.phase === "done") return;
    if (disconnect) this.stats.disconnects++;
    this.stats.success.abort++;
    if (s.phase === "waiting") this.waitingLive--;
    else this.leaveRunning(s);
    s.phase = "done";
    if (!this.inLoop) this.compactRunning();
    this.wakeAt(this.clock());
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** The current step length in ms (before jitter), for /sim/state. */
  stepMs(): number {
    const load = this.fixed.maxNumSeqs > 0 ? this.runningLive / this.fixed.maxNumSeqs : 0;
    return Math.max(MIN_STEP_MS, this.live.itlMs * (1 + this.live.batchSlowdown * load));
  }

  private wakeAt(at: number): void {
    if (this.stopped || at >= this.timerAt) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(this.loop, Math.max(0, at - this.clock()));
  }

  private readonly loop = (): void => {
    this.timer = undefined;
    this.timerAt = Infinity;
    if (this.stopped) return;
    const now = this.clock();
    this.inLoop = true;
    let nextWake = this.admit(now);
    const stepDue = now + SLACK_MS >= this.nextStepAt;
    let stepTokens = 0;
    let onCadence = 0;
    const run = this.running;
    for (let i = 0; i < run.length; i++) {
      const s = run[i]!;
      if (s.phase === "decode") {
        const iv = s.req.intervalMs;
        if (iv > 0) {
          if (s.nextAt <= now + SLACK_MS) {
            this.emit(s, now);
            s.nextAt = Math.max(s.nextAt + iv, now + SLACK_MS);
          }
          if (s.phase === "decode") nextWake = Math.min(nextWake, s.nextAt);
        } else {
          if (stepDue) {
            this.emit(s, now);
            stepTokens++;
          }
          if (s.phase === "decode") onCadence++;
        }
      } else if (s.phase === "prefill") {
        if (s.prefillDoneAt <= now + SLACK_MS) {
          this.prefillDone(s, now);
          if (phaseOf(s) === "decode") {
            if (s.req.intervalMs > 0) nextWake = Math.min(nextWake, s.nextAt);
            else onCadence++;
          }
        } else nextWake = Math.min(nextWake, s.prefillDoneAt);
      }
    }
    this.stats.noteStepTokens(now, stepTokens);
    this.compactRunning();
    nextWake = Math.min(nextWake, this.admit(now));
    this.inLoop = false;
    if (onCadence > 0) {
      if (stepDue || this.nextStepAt === Infinity) {
        const period = this.stepMs() * (1 + this.live.jitter * (2 * this.random() - 1));
        const next = this.nextStepAt === Infinity ? now + period : this.nextStepAt + period;
        // Keep the cadence against timer lateness, but never burst to catch up.
        this.nextStepAt = next < now + SLACK_MS ? now + period : next;
      }
      nextWake = Math.min(nextWake, this.nextStepAt);
    } else {
      this.nextStepAt = Infinity;
    }
    if (nextWake < Infinity) this.wakeAt(nextWake);
  };

  /** Move waiting requests into the batch; returns the earliest prefill completion among them. */
  private admit(now: number): number {
    let earliest = Infinity;
    const bs = this.fixed.blockSize;
    while (this.waitingLive > 0 && this.runningLive < this.fixed.maxNumSeqs) {
      const s = this.waiting[this.waitingHead]!;
      if (s.phase !== "waiting") {
        this.waitingHead++;
        continue;
      }
      const prompt = s.req.prompt;
      const tokens = prompt.count + s.generated;
      const total = Math.max(1, this.kv.blocksFor(tokens));
      // At least one prompt token is always computed (vLLM caps hits the same way).
      const alloc = this.kv.allocatePrompt(prompt.blockHashes, total, Math.floor((prompt.count - 1) / bs));
      if (!alloc) break; // FIFO: the head waits for blocks, nobody overtakes it
      this.waitingHead++;
      this.waitingLive--;
      s.blocks = alloc.blocks;
      const cached = alloc.hitBlocks * bs;
      if (s.scheduledAt < 0) {
        s.scheduledAt = now;
        s.cachedTokens = cached;
        this.stats.queue.observe((now - s.arrivedAt) / 1000);
        this.stats.prefixQueries += prompt.count;
        this.stats.prefixHits += cached;
        this.stats.promptTokens += prompt.count;
        this.stats.promptLen.observe(prompt.count);
      }
      s.prefillDoneAt = now + this.live.prefillOverheadMs + this.live.prefillMsPerToken * Math.max(0, tokens - cached);
      s.phase = "prefill";
      this.running.push(s);
      this.runningLive++;
      earliest = Math.min(earliest, s.prefillDoneAt);
    }
    if (this.waitingHead > 1024 && this.waitingHead * 2 > this.waiting.length) {
      this.waiting = this.waiting.slice(this.waitingHead);
      this.waitingHead = 0;
    }
    return earliest;
  }

  private prefillDone(s: Sequence, now: number): void {
    s.phase = "decode";
    if (s.generated === 0) this.stats.prefill.observe((now - s.scheduledAt) / 1000);
    if (s.req.stallAfter >= 0 && s.generated >= s.req.stallAfter) {
      s.phase = "stalled";
      return;
    }
    if (s.req.cutAfter >= 0 && s.generated >= s.req.cutAfter) {
      this.cut(s);
      return;
    }
    this.emit(s, now);
    if (s.req.intervalMs > 0) s.nextAt = now + s.req.intervalMs;
  }

  private emit(s: Sequence, now: number): void {
    const need = this.kv.blocksFor(s.req.prompt.count + s.generated + 1);
    while (s.blocks.length < need) {
      const b = this.kv.grow();
      if (b >= 0) s.blocks.push(b);
      else if (!this.preemptOther(s)) return;
    }
    const index = s.generated++;
    this.stats.generationTokens++;
    if (index === 0) {
      s.firstTokenAt = now;
      this.stats.ttft.observe((now - s.arrivedAt) / 1000);
    } else {
      this.stats.itl.observe((now - s.lastTokenAt) / 1000);
    }
    s.lastTokenAt = now;
    const last = s.generated >= s.req.outputTokens;
    try {
      s.req.sink.token(index, last);
    } catch {
      // a sink whose client is gone; its abort arrives on its own
    }
    if (s.phase !== "decode") return; // the sink aborted it
    if (last) this.finish(s, now);
    else if (s.generated === s.req.stallAfter) s.phase = "stalled";
    else if (s.generated === s.req.cutAfter) this.cut(s);
  }

  /** Free blocks for `s` by preempting the newest other request (vLLM v1 recompute preemption). */
  private preemptOther(s: Sequence): boolean {
    for (let i = this.running.length - 1; i >= 0; i--) {
      const v = this.running[i]!;
      if (v === s || (v.phase !== "decode" && v.phase !== "prefill" && v.phase !== "stalled")) continue;
      this.preempt(v);
      return true;
    }
    this.preempt(s);
    return false;
  }

  private preempt(v: Sequence): void {
    this.leaveRunning(v);
    v.phase = "waiting";
    this.stats.preemptions++;
    if (this.waitingHead > 0) this.waiting[--this.waitingHead] = v;
    else this.waiting.unshift(v);
    this.waitingLive++;
  }

  private finish(s: Sequence, now: number): void {
    this.leaveRunning(s);
    s.phase = "done";
    const st = this.stats;
    st.success[s.req.finishReason]++;
    st.e2e.observe((now - s.arrivedAt) / 1000);
    st.inference.observe((now - s.scheduledAt) / 1000);
    st.decode.observe((now - s.firstTokenAt) / 1000);
    if (s.generated > 1) st.tpot.observe((s.lastTokenAt - s.firstTokenAt) / 1000 / (s.generated - 1));
    st.generationLen.observe(s.generated);
    try {
      s.req.sink.finish(s.req.finishReason);
    } catch {
      // the client is gone; nothing left to tell it
    }
  }

  private cut(s: Sequence): void {
    this.leaveRunning(s);
    s.phase = "done";
    this.stats.success.abort++;
    try {
      s.req.sink.cut();
    } catch {
      // already gone
    }
  }

  private leaveRunning(s: Sequence): void {
    if (s.phase === "prefill" || s.phase === "decode" || s.phase === "stalled") {
      this.runningLive--;
      this.kv.release(s.blocks);
      s.blocks = [];
    }
  }

  private compactRunning(): void {
    let w = 0;
    const run = this.running;
    for (let r = 0; r < run.length; r++) {
      const s = run[r]!;
      if (s.phase === "prefill" || s.phase === "decode" || s.phase === "stalled") run[w++] = s;
    }
    run.length = w;
  }
}
