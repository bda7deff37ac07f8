/** POST /v1/responses on the sim-engine: parse (responses-request.ts), generate on the engine, answer as vLLM (responses-answer.ts). */

import { type ResponsesHead, ResponsesJsonAnswer, ResponsesSseAnswer } from "./responses-answer.ts";
import { parseResponsesRequest } from "./responses-request.ts";
import type { BunServer, SimRouteContext } from "./route-context.ts";
import { runGeneration } from "./run-sequences.ts";

export async function responsesRoute(ctx: SimRouteContext, req: Request, server: BunServer): Promise<Response> {
  ctx.counted();
  const blocked = ctx.notReady();
  if (blocked) return blocked;
  const parsed = parseResponsesRequest(await req.text(), ctx.limits);
  const head: ResponsesHead = {
    id: parsed.id,
    createdAt: Math.floor(Date.now() / 1000),
    model: parsed.model,
    promptTokens: parsed.plan.prompt.count,
    echo: parsed.echo,
    plan: parsed.plan,
  };
  return runGeneration(
    ctx,
    req,
    server,
    [parsed.plan],
    parsed.stream,
    (streaming) => (streaming ? new ResponsesSseAnswer(head, ctx.owner) : new ResponsesJsonAnswer(head, ctx.owner)),
    ctx.adapter(parsed.model),
  );
}
