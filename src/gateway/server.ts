/**
 * The data plane on Bun.serve with a plain fetch handler (no framework on the
 * hot path): routes each request to its handler — inference to the request
 * pipeline (pipeline/pipeline.ts), files and batches to the jobs handler
 * (jobs-handler.ts), stored responses to the responses handler
 * (responses-handler.ts), Anthropic's Messages API to its wrapper of the
 * pipeline (messages-handler.ts). Every error leaves in OpenAI's shape,
 * but on the Messages API's routes, where it leaves in Anthropic's.
 */

import type { Server } from "bun";
import type { Route } from "../metrics/names.ts";
import { declaresBody } from "../shared/bounded-body.ts";
import { errorResponse, LlmgwError } from "../shared/errors.ts";
import type { GatewayContext } from "./context.ts";
import { authenticateRoute } from "./gates/auth.ts";
import type { ModelCatalog } from "./model-catalog.ts";
import { dataPlaneOpenApi } from "./openapi/data-plane-openapi.ts";
import { handleJobs, JOBS_PATH, type JobsHandlerDeps } from "./pipeline/jobs-handler.ts";
import { handleMessages } from "./pipeline/messages-handler.ts";
import { handleInference, type PipelineDeps } from "./pipeline/pipeline.ts";
import { handleResponses, RESPONSE_PATH, type ResponsesHandlerDeps } from "./pipeline/responses-handler.ts";

/** Inference routes by path: OpenAI's, and vLLM's own (its paths, with and without /v1 as vLLM serves them). */
export const ROUTES: Record<string, Route> = {
  "/v1/chat/completions": "chat",
  "/v1/completions": "completions",
  "/v1/embeddings": "embeddings",
  "/v1/responses": "responses",
  "/tokenize": "tokenize",
  "/detokenize": "detokenize",
  "/score": "score",
  "/v1/score": "score",
  "/rerank": "rerank",
  "/v1/rerank": "rerank",
  "/v2/rerank": "rerank",
  "/pooling": "pooling",
  "/classify": "classify",
  "/v1/audio/transcriptions": "transcriptions",
};

/** Anthropic's Messages API (looked up only after the routes above: chat's path pays nothing for it). */
export const MESSAGES_ROUTES: Record<string, Route> = {
  "/v1/messages": "messages",
  "/v1/messages/count_tokens": "count_tokens",
};

/**
 * Bun gives a relative URL ("/health") to an HTTP/1.0 request without a Host
 * header (or with an unusable one), which `new URL()` alone refuses; the base
 * only stands in for the missing authority.
 */
const NO_HOST_BASE = "http://host.invalid";

/** A refusal's answer closes the connection: a client refused must not hold the socket (nor send a body Bun would drain). */
const CLOSE = { connection: "close" } as const;

function json(body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { headers: { "content-type": "application/json", ...headers } });
}

/** What the data plane's routes use: each handler's dependencies, and the catalog /v1/models lists. */
export type DataPlaneDeps = PipelineDeps & JobsHandlerDeps & ResponsesHandlerDeps & { readonly catalog: Pick<ModelCatalog, "listed"> };

/** `allowed`: a live key's model allow-list (the models it may not ask for are not listed, as the gate would refuse them); undefined: every model. */
function handleModels(ctx: { readonly catalog: Pick<ModelCatalog, "listed"> }, allowed: ReadonlySet<string> | undefined): Response {
  const created = Math.floor(Date.now() / 1000);
  const listed = ctx.catalog.listed();
  const visible = allowed === undefined ? listed : listed.filter((m) => allowed.has(m.id) || allowed.has(m.root));
  const data = visible.map((m) => ({ id: m.id, object: "model", created, owned_by: "llmgw", root: m.root, parent: m.parent ?? null }));
  return json({ object: "list", data });
}

const OPENAPI_PATH = "/openapi.json";
let openApiText: string | undefined;

function openApiDocument(req: Request, hasBody: boolean): Response {
  if (req.method !== "GET")
    return errorResponse(
      new LlmgwError("METHOD_NOT_ALLOWED", `${req.method} is not allowed on ${OPENAPI_PATH}; use GET`),
      hasBody ? { allow: "GET", ...CLOSE } : { allow: "GET" },
    );
  openApiText ??= JSON.stringify(dataPlaneOpenApi());
  return new Response(openApiText, { headers: { "content-type": "application/json", "cache-control": "no-cache" } });
}

export function createFetchHandler(ctx: DataPlaneDeps) {
  /** `server` is absent when the handler is driven in process (nothing to lift an idle timeout on). */
  return async function gatewayFetch(req: Request, server?: Server<undefined>): Promise<Response> {
    const path = new URL(req.url, NO_HOST_BASE).pathname;
    const route = ROUTES[path];
    if (route) {
      if (req.method !== "POST")
        return errorResponse(
          new LlmgwError("METHOD_NOT_ALLOWED", `${req.method} is not allowed on ${path}; use POST`),
          declaresBody(req) ? { allow: "POST", ...CLOSE } : { allow: "POST" },
        );
      return handleInference(ctx, req, server, route, path);
    }
    const messages = MESSAGES_ROUTES[path];
    if (messages) return handleMessages(ctx, req, server, messages, path);
    if (path === "/v1/models") {
      if (req.method !== "GET")
        return errorResponse(
          new LlmgwError("METHOD_NOT_ALLOWED", `${req.method} is not allowed on ${path}; use GET`),
          declaresBody(req) ? { allow: "GET", ...CLOSE } : { allow: "GET" },
        );
      // A data route like the others: which models a gateway serves is not public when keys are required.
      const principal = authenticateRoute(ctx, req);
      return principal instanceof Response ? principal : handleModels(ctx, principal.key?.models);
    }
    if (path === "/health") return new Response(null, { status: 200 });
    // Public, as OpenAI publishes its own: the shape of the API, naming no model, endpoint or tenant (SDK generators fetch it keyless).
    if (path === OPENAPI_PATH) return openApiDocument(req, declaresBody(req));
    if (JOBS_PATH.test(path)) return handleJobs(ctx, req.url.charCodeAt(0) === 47 ? new Request(new URL(req.url, NO_HOST_BASE).href, req) : req);
    if (RESPONSE_PATH.test(path)) return handleResponses(ctx, req.url.charCodeAt(0) === 47 ? new Request(new URL(req.url, NO_HOST_BASE).href, req) : req, path);
    return errorResponse(new LlmgwError("NOT_FOUND", `no route for ${req.method} ${path}`), declaresBody(req) ? CLOSE : {});
  };
}

/** `current`: the context each request starts with (a configuration reload swaps it; the listen address is never among what changes). */
export function startDataPlane(ctx: GatewayContext, current: () => GatewayContext = () => ctx): Server<undefined> {
  let handlerCtx = ctx;
  let handler = createFetchHandler(ctx);
  const fetchHandler = (req: Request, server?: Server<undefined>): Promise<Response> => {
    const now = current();
    if (now !== handlerCtx) {
      handlerCtx = now;
      handler = createFetchHandler(now);
    }
    return handler(req, server);
  };
  return Bun.serve({
    hostname: ctx.config.listen.host,
    port: ctx.config.listen.port,
    // We read bodies ourselves under max_body_bytes (after authentication) to
    // answer 413 in OpenAI's shape; Bun's own limit must never answer first.
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    idleTimeout: 120,
    fetch: fetchHandler,
    error(err) {
      ctx.log.error({ err }, "unhandled error in data plane");
      return errorResponse(new LlmgwError("INTERNAL_ERROR", "internal error"));
    },
  });
}
