/**
 * One simulated engine of the fleet twin: the sim-engine's own core
 * (src/sim/engine-core.ts), built from the same flags `llmgw sim-engine`
 * takes, driven by the twin's virtual clock instead of a timer. It reports
 * what the gateway's poller would read from its /metrics, and the KV-cache
 * events its publisher would send after each step.
 */
import type { EngineMetrics } from "../engines/engine-metrics.ts";
import type { KvCacheEvent } from "../engines/kv-events/model.ts";
import { loraInfo } from "../engines/lora-info.ts";
import { parsePrometheusText } from "../engines/prom-text.ts";
import type { ListedAdapter } from "../protocol/health-messages.ts";
import { parseCommandArgs } from "../shared/flags.ts";
import { seededUnit } from "../shared/seeded.ts";
import { simEngineCommand } from "../sim/command.ts";
import { buildSimConfig } from "../sim/command-config.ts";
import type { SimStaticConfig } from "../sim/config.ts";
import { engineCore } from "../sim/engine.ts";
import type { EngineCore } from "../sim/engine-core.ts";
import { generationSequences, requestLimits } from "../sim/generation-sequences.ts";
import { EngineLora } from "../sim/lora/engine-lora.ts";
import { expandLoraModulesArgv } from "../sim/lora/lora-config.ts";
import { type GenerationRequest, parseGenerationRequest, type RequestLimits } from "../sim/openai-request.ts";
import type { SeqRequest, SeqSink, Sequence } from "../sim/sequence.ts";
import { idsPrompt, type PromptTokens, textPrompt } from "../sim/tokens.ts";
import type { EventQueue } from "./event-queue.ts";

/** Where a request's tokens go: the time of each, then the end; `broken`: the engine's process died under it. */
interface TwinSink {
  token(index: number, at: number): void;
  finish(at: number): void;
  broken?(at: number): void;
}

export class TwinEngine {
  /** The engine's core; a fresh one (empty cache) after a restart. */
  core: EngineCore;
  readonly fixed: SimStaticConfig;
  /** LoRA adapters, as the served sim keeps them (absent with LoRA off). */
  lora: EngineLora | undefined;
  /** The process is gone (killed, or stopped after a drain): its port refuses, its polls fail. */
  down = false;
  /** Until then the engine makes no step (a hung engine core; its API server still answers). */
  private stalledUntil = -Infinity;
  /** Sequences on the core with their sinks, told when the process dies. */
  private readonly live = new Map<Sequence, TwinSink>();
  private readonly build: () => EngineCore;
  private readonly limits: RequestLimits;
  /** Called after each step that recorded KV-cache events (when the engine publishes them). */
  onKvEvents: ((events: KvCacheEvent[]) => void) | undefined;
  private wakeAt = Infinity;
  private wakeSeq = 0;
  private readonly hashRoot: bigint;

  /**
   * `flags`: `llmgw sim-engine` flags (--profile, --num-gpu-blocks,
   * --kv-events-config …), read as the sim-engine reads them; `--model` is
   * added. `seed`: the engine's own randomness (step jitter, the block-hash
   * root), so two runs with the same seed are the same.
   */
  constructor(
    readonly id: string,
    model: string,
    flags: readonly string[],
    private readonly clock: EventQueue,
    seed: number,
  ) {
    // As the sim-engine's own dispatch does: each of vLLM's several --lora-modules items gets a flag of its own.
    const args = parseCommandArgs(simEngineCommand, expandLoraModulesArgv(["--model", model, ...flags]));
    const { fixed, live } = buildSimConfig(args, { PYTHONHASHSEED: `twin-${seed}` });
    this.fixed = fixed;
    this.hashRoot = fixed.blockHashRoot ?? 0n;
    // The served engine's rule for its shortest step, so the twin's engine steps as the served one does.
    const random = seededUnit(seed);
    this.build = () => {
      const core = engineCore(fixed, live, random, (fixed.timeScale ?? 1) <= 1 ? 1 : Infinity);
      if (fixed.lora) this.lora = core.lora = new EngineLora(fixed.lora, fixed.models, () => core.runningCount + core.waitingCount > 0);
      return core;
    };
    this.core = this.build();
    this.limits = requestLimits(fixed, this.lora);
  }

  /**
   * A chat or completion request body as the served sim takes it (its prompt
   * rendered and tokenized, its answer's length planned, its LoRA adapter
   * resolved), started on the core: one sequence per choice, each with its
   * own sink. Throws the sim's SimHttpError where the served sim answers an
   * error.
   */
  generate(kind: "chat" | "completion", body: string, sink: (choice: number) => TwinSink): { parsed: GenerationRequest; seqs: Sequence[] } {
    const parsed = parseGenerationRequest(kind, body, this.limits);
    const seqs = generationSequences(parsed, this.lora, this.fixed.blockSize).map((seq, k) => {
      return this.start(seq, sink(k));
    });
    this.wake();
    return { parsed, seqs };
  }

  /** The LoRA adapters its /v1/models lists (none with LoRA off). */
  adapters(): ListedAdapter[] {
    return this.lora?.cards().map((c) => ({ name: c.id, parent: c.parent })) ?? [];
  }

  /** A completion prompt as this engine tokenizes it. */
  prompt(text: string): PromptTokens {
    return textPrompt(text, this.fixed.blockSize, undefined, this.hashRoot);
  }

  /** A continuation's prompt: the first prompt's ids and the delivered tokens', as this engine hashes its blocks. */
  continuation(ids: Int32Array): PromptTokens {
    return idsPrompt(Array.from(ids), this.fixed.blockSize, undefined, this.hashRoot);
  }

  /** Start generating `outputTokens` tokens (ignore_eos) for `prompt`; the returned sequence may be aborted. */
  submit(prompt: PromptTokens, outputTokens: number, sink: TwinSink): Sequence {
    const room = Math.max(1, this.fixed.maxModelLen - prompt.count);
    return this.start({ prompt, outputTokens: Math.min(outputTokens, room), finishReason: "length", stallAfter: -1, cutAfter: -1, intervalMs: 0 }, sink);
  }

  /** The client went away (or the gateway gave up): free the sequence's blocks now. */
  abort(seq: Sequence): void {
    if (!this.live.delete(seq)) return;
    this.core.abort(seq, true, this.clock.now);
    this.wake();
  }

  /** The process dies: every open stream breaks, the port refuses, the cache is gone. */
  kill(): void {
    if (this.down) return;
    this.down = true;
    this.stalledUntil = -Infinity;
    this.wakeSeq++;
    this.wakeAt = Infinity;
    const open = [...this.live];
    this.live.clear();
    for (const [, sink] of open) (sink.broken ?? sink.finish).call(sink, this.clock.now);
  }

  /** A fresh process is up: an empty cache and queue, at the profile's speed; the KV-event stream says the old blocks are gone. */
  restart(): void {
    if (!this.down) return;
    this.core = this.build();
    this.down = false;
    this.onKvEvents?.([{ type: "AllBlocksCleared" }]);
  }

  /** No step runs now (a stall in force). */
  get stalled(): boolean {
    return !this.down && this.clock.now < this.stalledUntil;
  }

  /** The engine makes no step until `until` (simulated ms); a step in flight ends then. */
  stall(until: number): void {
    if (this.down) return;
    this.stalledUntil = Math.max(this.stalledUntil, until);
    // The wake scheduled before the stall is void; the next waits for its end.
    this.wakeSeq++;
    this.wakeAt = Infinity;
    this.wake();
  }

  /** The core's sink of a sequence, which forgets it (`held.seq`, set once it is submitted) when it ends. */
  private seqSink(sink: TwinSink, held: { seq?: Sequence }): SeqSink {
    const clock = this.clock;
    const ended = () => {
      if (held.seq !== undefined) this.live.delete(held.seq);
      sink.finish(clock.now);
    };
    return { token: (index) => sink.token(index, clock.now), finish: ended, cut: ended };
  }

  private start(req: Omit<SeqRequest, "sink">, sink: TwinSink): Sequence {
    if (this.down) throw new Error(`${this.id} is down`);
    const held: { seq?: Sequence } = {};
    const seq = this.core.submit({ ...req, sink: this.seqSink(sink, held) }, this.clock.now);
    held.seq = seq;
    this.live.set(seq, sink);
    this.wake();
    return seq;
  }

  /** What a scrape of the engine's /metrics says now, as the gateway's metric mapping reads vLLM v1's. */
  metrics(): EngineMetrics {
    return {
      flavor: "vllm-v1",
      running: this.core.runningCount,
      waiting: this.core.waitingCount,
      kvUsage: this.core.kv.usage,
      prefixCacheHitRate: this.core.stats.prefixQueries > 0 ? this.core.stats.prefixHits / this.core.stats.prefixQueries : 0,
      malformedLines: 0,
      // vllm:lora_requests_info as the served sim writes it, read by the gateway's own parser.
      ...(this.lora ? loraOf(this.lora) : {}),
    };
  }

  /** Schedule the core's next event, when it moved earlier than the one scheduled (a later one cancels by generation). */
  private wake(): void {
    if (this.down) return;
    // A stalled engine's next event waits for the stall's end.
    const at = Math.max(this.core.nextEventAt(), this.stalledUntil);
    if (at === Infinity || at >= this.wakeAt) return;
    this.wakeAt = at;
    const gen = ++this.wakeSeq;
    this.clock.at(at, () => {
      if (gen !== this.wakeSeq) return;
      this.wakeAt = Infinity;
      this.core.advance(this.clock.now);
      if (this.onKvEvents) {
        const events = this.core.kv.takeEvents();
        if (events.length > 0) this.onKvEvents(events);
      }
      this.wake();
    });
  }
}

/** What the gateway's parser reads from the engine's vllm:lora_requests_info (nothing before its first step). */
function loraOf(lora: EngineLora): Pick<EngineMetrics, "lora"> {
  const info = loraInfo(parsePrometheusText(lora.metric.text()).samples);
  return info ? { lora: info } : {};
}
