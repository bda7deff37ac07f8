/**
 * POST /v1/messages and /v1/messages/count_tokens on the sim-engine (Anthropic's
 * Messages API, as vLLM serves it): parse (messages-request.ts), generate on
 * the engine, answer (messages-answer.ts). Every error on these routes —
 * a bad request, an unknown model, an injected fault — is in Anthropic's
 * shape, as vLLM's api_router translates its errors.
 */
import { anthropicErrorBody } from "../../shared/anthropic-errors.ts";
import { SimHttpError } from "../vllm-errors.ts";
import { type MessagesHead, MessagesJsonAnswer, MessagesSseAnswer } from "./messages-answer.ts";
import { countMessageTokens, parseMessagesRequest } from "./messages-request.ts";
import type { BunServer, SimRouteContext } from "./route-context.ts";
import { runGeneration } from "./run-sequences.ts";

function anthropicError(status: number, message: string, headers?: Headers): Response {
  const h = new Headers(headers);
  h.set("content-type", "application/json");
  return new Response(JSON.stringify(anthropicErrorBody(status, message)), { status, headers: h });
}

/** An answer that is an error in vLLM's OpenAI shape (an injected fault) re-shaped as Anthropic's; headers (Retry-After) kept. */
async function reshaped(res: Response): Promise<Response> {
  if (res.ok) return res;
  let message = res.statusText || `HTTP ${res.status}`;
  try {
    const body = (await res.json()) as { error?: { message?: unknown } };
    if (typeof body.error?.message === "string") message = body.error.message;
  } catch {
    // no JSON body (a shutdown's bare 503): the status says it
  }
  return anthropicError(res.status, message, res.headers);
}

async function answering(run: () => Promise<Response>): Promise<Response> {
  try {
    return await reshaped(await run());
  } catch (err) {
    if (err instanceof SimHttpError) return anthropicError(err.status, err.message);
    return anthropicError(500, err instanceof Error ? err.message : String(err));
  }
}

export function messagesRoute(ctx: SimRouteContext, req: Request, server: BunServer): Promise<Response> {
  return answering(async () => {
    ctx.counted();
    const blocked = ctx.notReady();
    if (blocked) return blocked;
    const parsed = parseMessagesRequest(await req.text(), ctx.limits);
    const head: MessagesHead = {
      id: `msg_${crypto.randomUUID().replaceAll("-", "")}`,
      model: parsed.model,
      promptTokens: parsed.promptTokens,
      plan: parsed.plan,
    };
    return runGeneration(
      ctx,
      req,
      server,
      [parsed.plan],
      parsed.stream,
      (streaming) => (streaming ? new MessagesSseAnswer(head, ctx.owner) : new MessagesJsonAnswer(head, ctx.owner)),
      ctx.adapter(parsed.model),
    );
  });
}

export function countTokensRoute(ctx: SimRouteContext, req: Request): Promise<Response> {
  return answering(async () => {
    const blocked = ctx.notReady();
    if (blocked) return blocked;
    const n = countMessageTokens(await req.text(), ctx.limits);
    return Response.json({ input_tokens: n, context_management: { original_input_tokens: n } });
  });
}
