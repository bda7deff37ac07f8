/**
 * Gate 4: the response cache (after idempotent replay, before the shed check
 * and admission: a hit uses no GPU). Opt-in per model, deterministic requests
 * only, keys per tenant (src/cache/). A hit answers with the recorded bytes
 * and `x-llmgw-cache: hit`; a cacheable miss records its answer on the way
 * out and says `miss`; anything else passes untouched.
 */
import type { CacheRoute } from "../../cache/cache-key.ts";
import type { ResponseCache } from "../../cache/response-cache-store.ts";
import type { Route } from "../../metrics/names.ts";
import type { AnswerRecorders } from "../request/answer-recorders.ts";
import type { Exchange } from "../request/exchange.ts";
import type { ParsedRequest } from "../request/parse.ts";

/**
 * The routes whose answers may be cached: a Responses API answer has an id
 * of its own and may be stored for a follow-up; tokenize, scoring and the
 * others are cheap or not worth holding.
 */
function cacheable(route: Route): route is CacheRoute {
  return route === "chat" || route === "completions" || route === "embeddings";
}

/** What the cache gate uses: the response cache. */
export interface CacheGateDeps {
  readonly cache: Pick<ResponseCache, "off" | "check">;
}

/** undefined at once when no model is cached. */
export function responseCacheGate(ctx: CacheGateDeps, x: Exchange, request: ParsedRequest, answer: AnswerRecorders): Promise<Response | undefined> | undefined {
  if (ctx.cache.off || !cacheable(x.route)) return undefined;
  return lookUp(ctx, x, request, x.route, answer);
}

async function lookUp(ctx: CacheGateDeps, x: Exchange, request: ParsedRequest, route: CacheRoute, answer: AnswerRecorders): Promise<Response | undefined> {
  const check = await ctx.cache.check({ tenant: x.tenant, route, requestedModel: request.body.model, model: request.model, body: request.body });
  switch (check.kind) {
    case "bypass":
      return undefined;
    case "miss":
      x.cache = "miss";
      answer.add(check.record);
      return undefined;
    case "hit": {
      // The recorded answer, under this request's id and quota state.
      const res = check.response;
      for (const [k, v] of Object.entries(x.headers())) res.headers.set(k, v);
      x.cache = "hit";
      x.finish("ok", res.status);
      return res;
    }
  }
}
