/**
 * The sim-engine's routes beyond chat, completions and embeddings, by path:
 * the Responses API, Anthropic's Messages API, scoring and reranking, pooling, classification and
 * transcription (each a module of its own). server.ts asks here for any path
 * it does not serve itself; undefined: no such route (FastAPI's 404).
 */
import { fastapiMethodNotAllowed } from "../vllm-errors.ts";
import { countTokensRoute, messagesRoute } from "./messages-route.ts";
import { classifyRoute, poolingRoute, rerankRoute, scoreRoute } from "./pooling-routes.ts";
import { responsesRoute } from "./responses-route.ts";
import type { BunServer, SimRouteContext } from "./route-context.ts";
import { transcriptionsRoute } from "./transcriptions.ts";

type Handler = (ctx: SimRouteContext, req: Request, server: BunServer) => Promise<Response>;

/** vLLM's paths (api_server.py and the pooling routers): /score and /rerank also under /v1, rerank under /v2 for Cohere clients. */
const POST_ROUTES: ReadonlyMap<string, Handler> = new Map<string, Handler>([
  ["/v1/responses", responsesRoute],
  ["/v1/messages", messagesRoute],
  ["/v1/messages/count_tokens", countTokensRoute],
  ["/score", scoreRoute],
  ["/v1/score", scoreRoute],
  ["/rerank", rerankRoute],
  ["/v1/rerank", rerankRoute],
  ["/v2/rerank", rerankRoute],
  ["/pooling", poolingRoute],
  ["/classify", classifyRoute],
  ["/v1/audio/transcriptions", transcriptionsRoute],
]);

/** The answer of an added route, or undefined when `path` is not one. */
export function extraRoute(ctx: SimRouteContext, path: string, req: Request, server: BunServer): Promise<Response> | Response | undefined {
  const handler = POST_ROUTES.get(path);
  if (handler === undefined || (ctx.fixed.noMessagesApi === true && path.startsWith("/v1/messages"))) return undefined;
  return req.method === "POST" ? handler(ctx, req, server) : fastapiMethodNotAllowed("POST");
}
