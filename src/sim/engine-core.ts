/**
 * The simulated engine's clockless core (pure: no timers, no I/O): requests
 * arrive, steps are planned (step-planner.ts), each step lasts what its
 * composition costs (step-time.ts), and when it ends every sequence whose
 * prompt is computed samples a token. A driver tells it the time: the
 * served engine from a wall clock (engine.ts), the calibration bench from a
 * virtual one. Times are simulated milliseconds.
 */
import { BusyTracker } from "./busy-tracker.ts";
import { EngineStats } from "./engine-stats.ts";
import { FrontendQueue } from "./frontend-queue.ts";
import { KvCache } from "./kv-cache.ts";
import { frontendLatency, stepNoise } from "./noise.ts";
import { type SeqRequest, Sequence } from "./sequence.ts";
import { type PlannerHost, planStep, type StepPlan } from "./step-planner.ts";
import { type Frontend, type StepComposition, type StepTiming, stepMs } from "./step-time.ts";
import { WaitQueue } from "./wait-queue.ts";

export interface CoreConfig {
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  numGpuBlocks: number;
  blockSize: number;
  maxModelLen: number;
  /** Record vLLM's KV-cache events (the served engine publishes them after each step). */
  kvEvents?: boolean;
  /** Distinct LoRA adapters a step may hold (vLLM's max_loras); absent: LoRA off. */
  maxLoras?: number;
  /**
   * vLLM's async scheduling: each step is planned while the one before it
   * runs, so a request reaching the engine mid-step joins the step after
   * next (its first token comes one step later than without).
   */
  asyncScheduling?: boolean;
}

/** What LoRA adds to the engine loop (src/sim/lora/engine-lora.ts). */
export interface CoreLora {
  /** Simulated ms the adapter loads of a step scheduling `seqs` add to it (0 when every adapter is on the GPU). */
  stepLoadMs(seqs: readonly Sequence[]): number;
  /** The scheduler's queues after a step was planned: vLLM records its LoRA stats every step. */
  observe(running: readonly Sequence[], waiting: WaitQueue): void;
}

/** What the core reads each step (live: POST /sim/config may change it). */
export interface CoreTiming {
  timing: StepTiming;
  /** The spread of each step's time: the coefficient of variation of its normal noise (0: every step as modelled). */
  jitter: number;
  /** The API server's time per request before the engine sees it. */
  frontend: Frontend;
  /** The mean of the exponential part of a request's API-server latency (ms; 0: every request the same). */
  frontendJitterMs: number;
  /** The flat model's fixed prefill time: a prompt's first token comes this long after its last chunk, the request holding its slot (ms). */
  firstTokenDelayMs: number;
}

export class EngineCore implements PlannerHost {
  readonly kv: KvCache;
  readonly stats: EngineStats;
  readonly busy = new BusyTracker();
  /** Sequences holding a batch slot, in admission order (some may be done or preempted until compacted). */
  private running: Sequence[] = [];
  private runningLive = 0;
  private readonly waiting = new WaitQueue();
  private readonly frontend = new FrontendQueue();
  private paced: Sequence[] = [];
  private step: StepPlan | undefined;
  private stepEndsAt = Infinity;
  /** When the step in flight (or the last one) started. */
  private stepStartedAt = -Infinity;
  private lastStepMs = 0;
  private lastComposition: StepComposition | undefined;
  /** Set while a step's tokens go out: a sink that aborts another request must not start a step mid-way. */
  private finishing = false;
  /** Something changed while no step ran: look at the queue at this time (as vLLM's next schedule() would). */
  private kickAt = Infinity;
  /** Set by an engine serving LoRA adapters. */
  lora: CoreLora | undefined;
  /** Every step takes this many times what the cost model says (1: as modelled; more: a throttled or shared GPU). */
  slowdown = 1;
  /** Told how far (engine ms) the schedule slipped when a step starts later than its predecessor's end: a driver that noticed that end late. */
  onSlip: ((ms: number) => void) | undefined;

  constructor(
    private readonly config: CoreConfig,
    private readonly live: CoreTiming,
    private readonly random: () => number = Math.random,
    /** Step ends one advance() may process: 1 keeps a real-time engine from sending two steps' tokens in one go. */
    private readonly stepsPerAdvance = Infinity,
  ) {
    this.kv = new KvCache(config.numGpuBlocks, config.blockSize, { events: config.kvEvents === true });
    this.stats = new EngineStats(config.maxModelLen);
  }

  get runningCount(): number {
    return this.runningLive;
  }

  /** Requests in the scheduler's queue (not those still in the API server's hands: vLLM's gauge does not count them either). */
  get waitingCount(): number {
    return this.waiting.live;
  }

  /** Duration of the step in flight (or the last one), simulated ms. */
  get currentStepMs(): number {
    return this.lastStepMs;
  }

  get lastStep(): StepComposition | undefined {
    return this.lastComposition;
  }

  submit(req: SeqRequest, now: number): Sequence {
    const s = new Sequence(req, now);
    this.stats.requestsTotal++;
    const f = this.live.frontend;
    // A request's latency varies only where the API server has one to vary.
    const latencyMs = f.latencyMs >= this.live.frontendJitterMs ? frontendLatency(f.latencyMs, this.live.frontendJitterMs, this.random) : f.latencyMs;
    if (this.frontend.admit(s, now, f.serviceMs, latencyMs) <= now) this.enqueue(s);
    this.kick(now);
    return s;
  }

  /** The client went away (or the server ends it): free its blocks at once. */
  abort(s: Sequence, disconnect: boolean, now: number): void {
    if (s.phase === "done") return;
    if (disconnect) this.stats.disconnects++;
    this.stats.success.abort++;
    if (s.phase === "waiting") this.waiting.forget();
    else if (s.phase === "pending") this.frontend.forget();
    else this.leaveBatch(s);
    s.phase = "done";
    this.kick(now);
  }

  /** The next time anything is due (a step's end, a request reaching the engine, a paced token); Infinity when idle. */
  nextEventAt(): number {
    let t = Math.min(this.stepEndsAt, this.kickAt);
    t = Math.min(t, this.frontend.nextAt());
    for (const s of this.paced) if ((s.phase === "paced" || s.phase === "prefilled") && s.nextAt < t) t = s.nextAt;
    return t;
  }

  /** Process everything due at or before `now`, in time order. */
  advance(now: number): void {
    let steps = 0;
    for (;;) {
      const t = this.nextEventAt();
      if (t > now) break;
      if (this.step && this.stepEndsAt === t) {
        if (steps++ >= this.stepsPerAdvance) break;
        this.finishStep(t);
        // Under async scheduling the next step was planned when this one started.
        this.startIfIdle(t, now, this.config.asyncScheduling ? this.stepStartedAt : Infinity);
        continue;
      }
      if (this.kickAt <= t) this.kickAt = Infinity;
      this.releasePending(t);
      this.pacedTokens(t);
      this.startIfIdle(t);
    }
  }

  // ——— PlannerHost ———

  preempt(v: Sequence): void {
    this.leaveBatch(v);
    v.phase = "waiting";
    v.computed = 0;
    this.stats.preemptions++;
    this.waiting.unshift(v);
  }

  admit(s: Sequence, hitTokens: number): void {
    // vLLM records a lookup at admission; one of a request coming back from preemption goes to its own counters.
    if (s.scheduledAt >= 0) this.stats.noteResumed(s.totalTokens, hitTokens);
    s.phase = "running";
    this.running.push(s);
    this.runningLive++;
  }

  // ——— internals ———

  private kick(now: number): void {
    if (!this.step && now < this.kickAt) this.kickAt = now;
  }

  private enqueue(s: Sequence): void {
    s.phase = "waiting";
    this.waiting.push(s);
  }

  private releasePending(t: number): void {
    this.frontend.release(t, (s) => this.enqueue(s));
  }

  /**
   * Plan and start a step at `at`. A driver that noticed the last step's end
   * late (`now` > `at`) keeps the cadence — the step still ends at `at` +
   * its length — unless that end has passed too: then it starts now, so a
   * late timer never sends two steps' tokens in a burst. `readyBy`: only
   * requests that reached the engine by then may join (async scheduling).
   */
  private startIfIdle(at: number, now = at, readyBy = Infinity): void {
    if (this.step || this.finishing) return;
    let plan = planStep(this.running, this.waiting, this.kv, this.config, this, readyBy);
    // Nothing was planned ahead: the scheduler takes whoever is there now.
    if (plan.seqs.length === 0 && readyBy !== Infinity) plan = planStep(this.running, this.waiting, this.kv, this.config, this);
    for (const s of plan.admitted) {
      if (s.scheduledAt >= 0) continue; // a preempted request coming back
      // A step kept on cadence may start a little before a late-noticed arrival: never before it.
      s.scheduledAt = Math.max(at, s.arrivedAt);
      this.stats.noteScheduled(s.scheduledAt - s.arrivedAt, s.req.prompt.count, s.cachedTokens);
    }
    if (plan.preempted.length > 0 || plan.admitted.length > 0) this.compactRunning();
    this.lora?.observe(this.running, this.waiting);
    if (plan.seqs.length === 0) {
      this.busy.idle(at);
      return;
    }
    // An adapter swapped into a GPU slot is copied before the forward pass (vLLM's set_active_loras): the step waits for it.
    const ms = stepMs(this.live.timing, plan.composition) * stepNoise(this.live.jitter, this.random) * this.slowdown + (this.lora?.stepLoadMs(plan.seqs) ?? 0);
    if (at + ms <= now) {
      this.onSlip?.(now - at);
      at = now;
    }
    this.step = plan;
    this.stepStartedAt = at;
    this.stepEndsAt = at + ms;
    this.lastStepMs = ms;
    this.lastComposition = plan.composition;
    this.busy.busy(at, this.stepEndsAt);
  }

  private finishStep(t: number): void {
    const plan = this.step!;
    this.step = undefined;
    this.stepEndsAt = Infinity;
    this.finishing = true;
    try {
      this.deliver(plan, t);
    } finally {
      this.finishing = false;
    }
    this.compactRunning();
  }

  private deliver(plan: StepPlan, t: number): void {
    const bs = this.config.blockSize;
    let generated = 0;
    // vLLM's iteration stats count a prompt once, in the step whose output is its first token.
    let prompts = 0;
    for (let i = 0; i < plan.seqs.length; i++) {
      const s = plan.seqs[i]!;
      if (s.phase !== "running") continue; // aborted while the step ran
      const before = s.computed;
      s.computed += plan.tokens[i]!;
      // Every block the step filled joins the prefix cache, generated tokens' too (vLLM's cache_full_blocks).
      const from = Math.floor(before / bs);
      const upTo = s.hashFullBlocks(Math.floor(s.computed / bs), bs);
      if (from < upTo) this.kv.registerRun(s.blocks, s.blockHashes, s.tokenIds(upTo * bs), from, upTo, s.req.adapter, s.req.prompt.hashKeys?.salt);
      if (s.computed < s.totalTokens) continue;
      const delay = this.live.firstTokenDelayMs;
      if (s.generated === 0 && delay > 0) {
        s.phase = "prefilled";
        s.nextAt = t + delay;
        this.paced.push(s);
        continue;
      }
      if (s.generated === 0) prompts += s.req.prompt.count;
      this.produce(s, t);
      generated++;
    }
    this.stats.noteStepTokens(t, generated);
    this.stats.iterationTokens.observe(prompts + generated);
  }

  /** The step sampled a token for `s`, or a fault holds it first. */
  private produce(s: Sequence, t: number): void {
    const r = s.req;
    if (r.stallAfter >= 0 && s.generated >= r.stallAfter) {
      s.phase = "stalled";
      return;
    }
    if (r.cutAfter >= 0 && s.generated >= r.cutAfter) {
      this.cut(s);
      return;
    }
    this.emit(s, t);
    if (s.phase === "running" && r.intervalMs > 0) {
      s.phase = "paced";
      s.nextAt = t + r.intervalMs;
      this.paced.push(s);
    }
  }

  private pacedTokens(t: number): void {
    if (this.paced.length === 0) return;
    for (const s of this.paced) {
      if (s.phase === "prefilled" && s.nextAt <= t) {
        s.phase = "running";
        this.produce(s, t);
        continue;
      }
      if (s.phase !== "paced" || s.nextAt > t) continue;
      const need = this.kv.blocksFor(s.totalTokens + 1);
      while (s.blocks.length < need) {
        const b = this.kv.grow();
        if (b < 0) break;
        s.blocks.push(b);
      }
      this.emit(s, t);
      s.nextAt = t + s.req.intervalMs;
    }
    this.paced = this.paced.filter((s) => s.phase === "paced" || s.phase === "prefilled");
  }

  private emit(s: Sequence, t: number): void {
    const index = s.generated++;
    const st = this.stats;
    st.generationTokens++;
    if (index === 0) {
      s.firstTokenAt = t;
      st.ttft.observe((t - s.arrivedAt) / 1000);
      st.prefill.observe((t - s.scheduledAt) / 1000);
      if (s.req.params?.n !== undefined) st.paramsN.observe(s.req.params.n);
    } else {
      st.itl.observe((t - s.lastTokenAt) / 1000);
    }
    s.lastTokenAt = t;
    const last = s.generated >= s.req.outputTokens;
    try {
      s.req.sink.token(index, last);
    } catch {
      // a sink whose client is gone; its abort arrives on its own
    }
    if (s.phase !== "running" && s.phase !== "paced") return; // the sink aborted it
    if (last) this.finish(s, t);
    else if (s.generated === s.req.stallAfter) s.phase = "stalled";
    else if (s.generated === s.req.cutAfter) this.cut(s);
  }

  private finish(s: Sequence, t: number): void {
    this.leaveBatch(s);
    s.phase = "done";
    const st = this.stats;
    st.success[s.req.finishReason]++;
    st.e2e.observe((t - s.arrivedAt) / 1000);
    st.inference.observe((t - s.scheduledAt) / 1000);
    st.decode.observe((t - s.firstTokenAt) / 1000);
    if (s.generated > 1) st.tpot.observe((s.lastTokenAt - s.firstTokenAt) / 1000 / (s.generated - 1));
    st.generationLen.observe(s.generated);
    if (s.req.params?.maxTokens !== undefined) st.paramsMaxTokens.observe(s.req.params.maxTokens);
    try {
      s.req.sink.finish(s.req.finishReason, s.cachedTokens);
    } catch {
      // the client is gone; nothing left to tell it
    }
  }

  private cut(s: Sequence): void {
    this.leaveBatch(s);
    s.phase = "done";
    this.stats.success.abort++;
    try {
      s.req.sink.cut();
    } catch {
      // already gone
    }
  }

  private leaveBatch(s: Sequence): void {
    if (s.phase === "running" || s.phase === "stalled" || s.phase === "paced" || s.phase === "prefilled") {
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
      if (s.phase === "running" || s.phase === "stalled" || s.phase === "paced" || s.phase === "prefilled") run[w++] = s;
    }
    run.length = w;
  }
}
