/**
 * What a parsed generation request hands the engine core: one sequence per
 * choice, its prompt keyed by the request's LoRA adapter (vLLM hashes the
 * adapter into every block), the answer's planned length and ending, the
 * client's parameters for the request_params_* histograms, and any fault the
 * request asked for. The served sim (server.ts) and the fleet twin's engines
 * (src/twin/twin-engine.ts) both build their sequences here.
 */
import type { SimStaticConfig } from "./config.ts";
import { type EngineLora, saltedForAdapter } from "./lora/engine-lora.ts";
import type { GenerationRequest, RequestLimits } from "./openai-request.ts";
import type { SeqRequest } from "./sequence.ts";

/** A fault a request asked for (faults.ts): hold after `stallAfter` tokens, cut after `cutAfter`, or pace at `intervalMs`. */
interface SeqFault {
  stallAfter: number;
  cutAfter: number;
  intervalMs: number;
}

const NO_FAULT: Readonly<SeqFault> = Object.freeze({ stallAfter: -1, cutAfter: -1, intervalMs: 0 });

/** What parsing a request needs of the engine: its models, lengths, adapters and hash root. */
export function requestLimits(fixed: SimStaticConfig, lora: EngineLora | undefined): RequestLimits {
  return {
    models: fixed.models,
    maxModelLen: fixed.maxModelLen,
    blockSize: fixed.blockSize,
    outputLen: fixed.outputLen,
    outputLenDist: fixed.outputLenDist,
    rejectContinuation: fixed.rejectContinuation,
    hashRoot: fixed.blockHashRoot,
    ...(lora ? { adapters: lora } : {}),
  };
}

/** The sequences of `parsed`, in choice order, without their sinks. */
export function generationSequences(
  parsed: GenerationRequest,
  lora: EngineLora | undefined,
  blockSize: number,
  fault: Readonly<SeqFault> = NO_FAULT,
): Omit<SeqRequest, "sink">[] {
  const adapter = lora?.resolve(parsed.model);
  // A fault after N tokens needs an answer longer than N to happen at all.
  const faultTokens = Math.max(fault.stallAfter, fault.cutAfter);
  return parsed.choices.map((plan, k) => ({
    prompt: adapter ? saltedForAdapter(plan.prompt, adapter, blockSize) : plan.prompt,
    ...(adapter ? { adapter } : {}),
    outputState: plan.state,
    outputTokens: faultTokens >= 0 ? Math.max(plan.outputTokens, faultTokens + 1) : plan.outputTokens,
    finishReason: plan.finishReason,
    stallAfter: fault.stallAfter,
    cutAfter: fault.cutAfter,
    intervalMs: fault.intervalMs,
    params: { ...(k % parsed.n === 0 ? { n: parsed.n } : {}), ...(parsed.maxTokens !== undefined ? { maxTokens: parsed.maxTokens } : {}) },
  }));
}
