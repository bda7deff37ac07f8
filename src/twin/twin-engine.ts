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
import { simEngineCommand } from "../sim/command.ts";
import { buildSimConfig } from "../sim/command-config.ts";
import type { SimStaticConfig } from "../sim/config.ts";
import { engineCore } from "../sim/engine.ts";
import type { EngineCore } from "../sim/engine-core.ts";
import { generationSequences, requestLimits } from "../sim/generation-sequences.ts";
import { EngineLora } from "../sim/lora/engine-lora.ts";
import { expandLoraModulesArgv } from "../sim/lora/lora-config.ts";
import { type GenerationRequest, parseGenerationRequest, type RequestLimits } from "../sim/openai-request.ts";
import type { SeqSink, Sequence } from "../sim/sequence.ts";
import { type PromptTokens, textPrompt } from "../sim/tokens.ts";
import type { EventQueue } from "./event-queue.ts";
import { seededUnit } from "./seeded.ts";

/** Where a request's tokens go: the time of each, then the end. */
interface TwinSink {
  token(index: number, at: number): void;
  finish(at: number): void;
}

export class TwinEngine {
  readonly core: EngineCore;
  readonly fixed: SimStaticConfig;
  /** LoRA adapters, as the served sim keeps them (absent with LoRA off). */
  readonly lora: EngineLora | undefined;
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
    this.core = engineCore(fixed, live, seededUnit(seed), (fixed.timeScale ?? 1) <= 1 ? 1 : Infinity);
    const core = this.core;
    if (fixed.lora) this.lora = core.lora = new EngineLora(fixed.lora, fixed.models, () => core.runningCount + core.waitingCount > 0);
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
      const out = sink(k);
      const clock = this.clock;
      return this.core.submit(
        { ...seq, sink: { token: (index) => out.token(index, clock.now), finish: () => out.finish(clock.now), cut: () => out.finish(clock.now) } },
        clock.now,
      );
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

  /** Start generating `outputTokens` tokens (ignore_eos) for `prompt`; the returned sequence may be aborted. */
  submit(prompt: PromptTokens, outputTokens: number, sink: TwinSink): Sequence {
    const clock = this.clock;
    const seqSink: SeqSink = {
      token: (index) => sink.token(index, clock.now),
      finish: () => sink.finish(clock.now),
      cut: () => sink.finish(clock.now),
    };
    const room = Math.max(1, this.fixed.maxModelLen - prompt.count);
    const seq = this.core.submit(
      { prompt, outputTokens: Math.min(outputTokens, room), finishReason: "length", stallAfter: -1, cutAfter: -1, intervalMs: 0, sink: seqSink },
      clock.now,
    );
    this.wake();
    return seq;
  }

  /** The client went away (or the gateway gave up): free the sequence's blocks now. */
  abort(seq: Sequence): void {
    this.core.abort(seq, true, this.clock.now);
    this.wake();
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
    const at = this.core.nextEventAt();
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
