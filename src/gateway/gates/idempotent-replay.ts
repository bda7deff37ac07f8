/**
 * Gate 3: idempotent replay (after auth and quota, before the cache). A POST
 * with an Idempotency-Key whose request completed is answered with the
 * recorded bytes — no GPU, so before the shed check and admission; the same
 * key with another body is a 422; a duplicate of a request still running
 * waits for it, then replays or gets a 409 (src/jobs/idempotency-gate.ts).
 * Otherwise this request's answer is recorded on its way out.
 */
import { IDEMPOTENCY_HEADER, type IdempotencyGate } from "../../jobs/idempotency-gate.ts";
import type { AnswerRecorders } from "../request/answer-recorders.ts";
import type { Exchange } from "../request/exchange.ts";
import type { ParsedRequest } from "../request/parse.ts";

/** What the replay gate uses: the idempotency records (their store opened on first use). */
export interface ReplayGateDeps {
  readonly jobs: { opened(): Promise<{ readonly idempotency: Pick<IdempotencyGate, "check"> }> };
}

/** undefined at once for a request without an Idempotency-Key. */
export function idempotentReplayGate(
  ctx: ReplayGateDeps,
  x: Exchange,
  request: ParsedRequest,
  req: Request,
  answer: AnswerRecorders,
): Promise<Response | undefined> | undefined {
  if (!req.headers.has(IDEMPOTENCY_HEADER)) return undefined;
  return replayOrRecord(ctx, x, request, req, answer);
}

async function replayOrRecord(ctx: ReplayGateDeps, x: Exchange, request: ParsedRequest, req: Request, answer: AnswerRecorders): Promise<Response | undefined> {
  const { idempotency } = await ctx.jobs.opened();
  const check = await idempotency.check(req, x.tenant, request.rawBody, x.signal);
  if (check.kind === "none") return undefined;
  if (check.kind === "run") {
    answer.add(check.record);
    return undefined;
  }
  // Byte for byte as first answered (its x-request-id included); only the quota state is today's.
  const res = check.response;
  for (const [k, v] of Object.entries(x.quotaHeaders)) res.headers.set(k, v);
  x.replay = true;
  x.finish("ok", res.status);
  return res;
}
