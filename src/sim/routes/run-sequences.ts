/**
 * Running one answer's choices on the engine, with the per-request faults
 * the sim injects (x-sim-fault, --fault-rate: the same set and meaning as
 * the chat and completions routes in server.ts), for the routes that
 * generate (Responses, transcription). The answer's transport (an SSE
 * stream or a pending JSON response) is the route's own.
 */
import type { ChoicePlan } from "../answer-plan.ts";
import type { Closable } from "../answer-stream.ts";
import type { SeqSink } from "../engine.ts";
import { chooseFault, FAULT_HEADER } from "../faults.ts";
import { saltedForAdapter } from "../lora/engine-lora.ts";
import type { SeqAdapter } from "../sequence.ts";
import type { PromptTokens } from "../tokens.ts";
import { badRequest, SimHttpError, vllmErrorResponse } from "../vllm-errors.ts";
import type { BunServer, SimRouteContext } from "./route-context.ts";

/** One answer's transport: fed by the engine through sink(k), answered with respond(). */
export interface GenerationAnswer extends Closable {
  sink(k: number): SeqSink;
  /** The client left: set by runGeneration before respond(). */
  onCancel: () => void;
  respond(): Response | Promise<Response>;
}

/** A fault that answers before any generation, or the timing a fault gives the sequences. */
function faultPlan(req: Request, ctx: SimRouteContext): Response | { stallAfter: number; cutAfter: number; intervalMs: number; streamable: boolean } {
  const fault = chooseFault(req.headers.get(FAULT_HEADER), ctx.live.faultRate, ctx.live.faultTypes);
  if (fault === "bad-header") throw badRequest(`${FAULT_HEADER}: unknown fault type`, FAULT_HEADER);
  switch (fault?.kind) {
    case "500":
      return vllmErrorResponse(new SimHttpError(500, "InternalServerError", "Injected fault 500 (sim-engine)."));
    case "429":
      return vllmErrorResponse(new SimHttpError(429, "RateLimitError", "Injected fault 429 (sim-engine)."), { "retry-after": "1" });
    case "503":
      return vllmErrorResponse(new SimHttpError(503, "ServiceUnavailableError", "Injected fault 503 (sim-engine)."));
    case "no-headers":
    case "no-first-token":
      return { stallAfter: 0, cutAfter: -1, intervalMs: 0, streamable: fault.kind !== "no-headers" };
    case "stall":
      return { stallAfter: fault.tokens, cutAfter: -1, intervalMs: 0, streamable: true };
    case "cut":
      return { stallAfter: -1, cutAfter: fault.tokens, intervalMs: 0, streamable: true };
    case "slow":
      return { stallAfter: -1, cutAfter: -1, intervalMs: fault.intervalMs, streamable: true };
    default:
      return { stallAfter: -1, cutAfter: -1, intervalMs: 0, streamable: true };
  }
}

/**
 * Submit `plans` (each with its own prompt) and answer through the
 * transport `make` builds: `streaming` is false when the request asked for
 * a stream but a no-headers fault must hold the headers back. A request
 * naming a LoRA adapter runs with it (`adapter`), as chat and completions do.
 */
export async function runGeneration(
  ctx: SimRouteContext,
  req: Request,
  server: BunServer,
  plans: readonly ChoicePlan[],
  stream: boolean,
  make: (streaming: boolean) => GenerationAnswer,
  adapter?: SeqAdapter,
): Promise<Response> {
  const f = faultPlan(req, ctx);
  if (f instanceof Response) return f;
  server.timeout(req, 0);
  const faultTokens = Math.max(f.stallAfter, f.cutAfter);
  const answer = make(stream && f.streamable);
  ctx.track(answer);
  const seqs = plans.map((plan, k) =>
    ctx.engine.submit({
      prompt: adapter ? saltedForAdapter(plan.prompt as PromptTokens, adapter, ctx.fixed.blockSize) : (plan.prompt as PromptTokens),
      ...(adapter ? { adapter } : {}),
      outputState: plan.state,
      outputTokens: faultTokens >= 0 ? Math.max(plan.outputTokens, faultTokens + 1) : plan.outputTokens,
      finishReason: plan.finishReason,
      stallAfter: f.stallAfter,
      cutAfter: f.cutAfter,
      intervalMs: f.intervalMs,
      sink: answer.sink(k),
    }),
  );
  const onGone = () => {
    for (const seq of seqs) ctx.engine.abort(seq, true);
    answer.shutdown();
  };
  answer.onCancel = onGone;
  req.signal.addEventListener("abort", onGone, { once: true });
  return await answer.respond();
}
