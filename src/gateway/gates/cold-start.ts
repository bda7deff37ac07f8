/**
 * Gate 6: a request for a model the fleet scales to zero (or one of its
 * adapters), while no replica of it serves (after batch shed, before the
 * adapter gate and admission). The request asks the fleet for a replica
 * and waits for one to serve — at most the model's `cold_start_wait_ms`,
 * never past its client, and only while fewer requests than the cap in
 * serve/cold-starts.ts are waiting for that model; once a replica serves,
 * it is routed as any other request.
 * Past the deadline it is answered 503 NO_READY_ENDPOINT with Retry-After.
 * Every other request passes with one map lookup and no promise.
 */
import { LlmgwError } from "../../shared/errors.ts";
import type { ColdStartWaits } from "../cold-start-waits.ts";
import type { Exchange } from "../request/exchange.ts";

export interface ColdStartGateDeps {
  readonly coldStarts?: ColdStartWaits;
}

/** `model`: the request's (canonical; an adapter waits for its base). */
export function coldStartGate(ctx: ColdStartGateDeps, x: Exchange, model: string): Promise<void> | undefined {
  const cold = ctx.coldStarts;
  if (cold === undefined) return undefined;
  const waitMs = cold.waitFor(model);
  if (waitMs === undefined) return undefined;
  return waitForReplica(cold, x, model, waitMs);
}

async function waitForReplica(cold: ColdStartWaits, x: Exchange, model: string, waitMs: number): Promise<void> {
  const r = await cold.wait(model, x, x.signal, waitMs);
  if (r.kind === "serving") return;
  if (r.kind === "aborted") throw new LlmgwError("INTERNAL_ERROR", "client went away while a replica of its model was starting");
  if (r.kind === "full")
    throw new LlmgwError(
      "NO_READY_ENDPOINT",
      `model '${model}' is scaled to zero and a replica is starting; ${r.waiting} requests already wait for it, the most that may`,
      { retryAfterS: 1 },
    );
  throw new LlmgwError("NO_READY_ENDPOINT", `model '${model}' is scaled to zero and no replica served within ${waitMs} ms (one is starting)`, {
    retryAfterS: r.retryAfterS,
  });
}
