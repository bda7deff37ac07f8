/** Drives the sim-engine's clockless core on a virtual clock, for unit tests of its cache and scheduler. */
import { EngineCore } from "../../src/sim/engine-core.ts";
import type { SeqRequest, Sequence } from "../../src/sim/sequence.ts";
import { NO_FRONTEND } from "../../src/sim/step-time.ts";
import type { PromptTokens } from "../../src/sim/tokens.ts";

export function simCore(opts: { numGpuBlocks: number; blockSize?: number; maxNumSeqs?: number; maxNumBatchedTokens?: number; kvEvents?: boolean }): EngineCore {
  return new EngineCore(
    {
      maxNumSeqs: opts.maxNumSeqs ?? 8,
      maxNumBatchedTokens: opts.maxNumBatchedTokens ?? 512,
      numGpuBlocks: opts.numGpuBlocks,
      blockSize: opts.blockSize ?? 16,
      maxModelLen: 4096,
      kvEvents: opts.kvEvents ?? false,
    },
    {
      timing: { derived: undefined, derivedScale: 1, flatDecode: { itlMs: 1, batchSlowdown: 0, maxNumSeqs: 8 }, flatPrefill: { msPerToken: 0.01 } },
      jitter: 0,
      frontendJitterMs: 0,
      frontend: NO_FRONTEND,
      firstTokenDelayMs: 0,
    },
  );
}

/** A request that generates `outputTokens` tokens; `done` flips when it finishes. */
export function simRequest(prompt: PromptTokens, outputTokens: number, extra: Partial<SeqRequest> = {}): SeqRequest & { done: boolean } {
  const r = {
    prompt,
    outputTokens,
    finishReason: "length" as const,
    stallAfter: -1,
    cutAfter: -1,
    intervalMs: 0,
    done: false,
    sink: {
      token() {},
      finish: () => {
        r.done = true;
      },
      cut() {},
    },
    ...extra,
  };
  return r;
}

/** Advance the core's virtual clock until every request given is done (bounded: at most `maxEvents` events). */
export function runUntilDone(core: EngineCore, reqs: readonly { done: boolean }[], maxEvents = 100_000): void {
  for (let i = 0; i < maxEvents && reqs.some((r) => !r.done); i++) {
    const t = core.nextEventAt();
    if (!Number.isFinite(t)) break;
    core.advance(t);
  }
  if (reqs.some((r) => !r.done)) throw new Error("runUntilDone: a request did not finish");
}

/** Submit one request at `now` and run it to its end; the sequence tells what it hit. */
export function runOne(core: EngineCore, req: SeqRequest & { done: boolean }, now = core.nextEventAt()): Sequence {
  const s = core.submit(req, Number.isFinite(now) ? now : 0);
  runUntilDone(core, [req]);
  return s;
}
