/**
 * The data plane on Bun.serve with a plain fetch handler (no framework on the
 * hot path): parse → resolve model → dispatch → relay. Every error leaves in
 * OpenAI's shape; nothing a client sends can throw out of the handler.
 */
import type { Server } from "bun";
import { UNKNOWN_MODEL, type Outcome, type Route } from "../metrics/names.ts";
import { requestPrefixHashes } from "../scheduling/prefix-hash.ts";
import { LlmgwError, asLlmgwError, errorResponse } from "../shared/errors.ts";
import type { GatewayContext } from "./context.ts";
import { dispatchInference, type Finish } from "./proxy/dispatch.ts";
import { parseInferenceBody, readBodyLimited } from "./request-parse.ts";
import type { Principal } from "./gates/auth.ts";
import { estimateTokens } from "./gates/quota.ts";

const ROUTES: Record<string, Route> = {
  "/v1/chat/completions": "chat",
  "/v1/completions": "completions",
  "/v1/embeddings": "embeddings",
};

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

function requestIdOf(req: Request): string {
  const given = req.headers.get("x-request-id");
  return given && REQUEST_ID_RE.test(given) ? given : crypto.randomUUID();
}

/** A UTF-8 byte-order mark is legal before JSON text but Python's json (vLLM, SGLang) rejects it: never forward one. */
function withoutBom(raw: Uint8Array): Uint8Array {
  return raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf ? raw.subarray(3) : raw;
}

function json(body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { headers: { "content-type": "application/json", ...headers } });
}

export function handleModels(ctx: GatewayContext): Response {
  const created = Math.floor(Date.now() / 1000);
  const data = ctx.catalog.listed().map((m) => ({ id: m.id, object: "model", created, owned_by: "llmgw", root: m.root, parent: null }));
  return json({ object: "list", data });
}

async function handleInference(ctx: GatewayContext, req: Request, server: Server<undefined>, route: Route, path: string): Promise<Response> {
  const arrivedAt = performance.now();
  const requestId = requestIdOf(req);
  let modelLabel = UNKNOWN_MODEL;
  let stream = false;
  const record = (f: Pick<Finish, "outcome" | "status" | "endpoint" | "attempts" | "usage" | "error">) => {
    const seconds = (performance.now() - arrivedAt) / 1000;
    ctx.metrics.requests.inc({ model: modelLabel, route, outcome: f.outcome });
    ctx.metrics.duration.observe({ model: modelLabel, route, stream: String(stream) }, seconds);
    if (f.usage) {
      ctx.metrics.tokens.inc({ model: modelLabel, kind: "prompt" }, f.usage.prompt_tokens);
      ctx.metrics.tokens.inc({ model: modelLabel, kind: "completion" }, f.usage.completion_tokens);
    }
    // One audit line per request.
    ctx.log.info(
      {
        request_id: requestId,
        route,
        model: modelLabel,
        stream,
        outcome: f.outcome,
        status: f.status,
        endpoint: f.endpoint,
        attempts: f.attempts,
        prompt_tokens: f.usage?.prompt_tokens,
        completion_tokens: f.usage?.completion_tokens,
        duration_ms: Math.round(seconds * 1000),
        error: f.error,
      },
      "request",
    );
  };
  let quotaHeaders: Record<string, string> = {};
  const reject = (err: LlmgwError, outcome: Outcome): Response => {
    record({ outcome, status: err.status, endpoint: undefined, attempts: 0, usage: undefined, error: err.message });
    return errorResponse(err, { "x-request-id": requestId, ...quotaHeaders });
  };

  try {
    // Gates, in order: auth (before reading a body), then quota (needs the token estimate).
    let principal: Principal;
    try {
      principal = ctx.auth.authenticate(req.headers);
    } catch (err) {
      const e = asLlmgwError(err);
      if (e.code === "INVALID_API_KEY") ctx.metrics.admissionRejections.inc({ band: "none", reason: "unauthorized" });
      return reject(e, "rejected");
    }
    const raw = withoutBom(await readBodyLimited(req, ctx.config.maxBodyBytes));
    const body = parseInferenceBody(raw, route);
    stream = body.stream === true;
    const model = ctx.catalog.resolve(body.model);
    if (model === undefined) {
      return reject(new LlmgwError("MODEL_NOT_FOUND", `The model '${body.model}' does not exist`, { param: "model" }), "client_error");
    }
    modelLabel = model;
    const estTokens = estimateTokens(body);
    try {
      quotaHeaders = ctx.quota.admit(principal.tenant, estTokens, Date.now()).headers;
    } catch (err) {
      const e = asLlmgwError(err);
      ctx.metrics.admissionRejections.inc({ band: principal.bandName, reason: "rate_limited" });
      return reject(e, "rejected");
    }
    const tenant = principal.tenant;
    // Long prefills send nothing for a while; Bun's idle timeout would cut
    // them. The dispatcher enforces the request's own deadlines instead.
    server.timeout(req, 0);
    return await dispatchInference(
      ctx,
      {
        route,
        path,
        body,
        rawBody: raw,
        model,
        stream,
        includeUsage: body.stream_options?.include_usage === true,
        prefixHashes: ctx.usesPrefixHashes && route !== "embeddings" ? requestPrefixHashes(body, ctx.config.scheduling.prefixAffinity) : [],
        requestId,
        arrivedAt,
        signal: req.signal,
        band: principal.band,
        tenant,
        estTokens,
      },
      (f) => {
        // Correct the token estimate with the engine's usage; a request that
        // never reached an engine gets its tokens back.
        if (f.usage) ctx.quota.settle(tenant, estTokens, f.usage.prompt_tokens + f.usage.completion_tokens, Date.now());
        else if (f.attempts === 0) ctx.quota.refund(tenant, estTokens, Date.now());
        ctx.scheduler.release();
        record(f);
      },
      quotaHeaders,
    );
  } catch (err) {
    if (req.signal.aborted) return reject(new LlmgwError("INTERNAL_ERROR", "client went away while sending the body"), "cancelled");
    const e = asLlmgwError(err);
    if (e.code === "INTERNAL_ERROR") ctx.log.error({ err, request_id: requestId }, "request failed");
    return reject(e, e.status < 500 ? "client_error" : "upstream_error");
  }
}

export function createFetchHandler(ctx: GatewayContext) {
  return async function gatewayFetch(req: Request, server: Server<undefined>): Promise<Response> {
    const path = new URL(req.url).pathname;
    const route = ROUTES[path];
    if (route) {
      if (req.method !== "POST") return errorResponse(new LlmgwError("METHOD_NOT_ALLOWED", `${req.method} is not allowed on ${path}; use POST`), { allow: "POST" });
      return handleInference(ctx, req, server, route, path);
    }
    if (path === "/v1/models") {
      if (req.method !== "GET") return errorResponse(new LlmgwError("METHOD_NOT_ALLOWED", `${req.method} is not allowed on ${path}; use GET`), { allow: "GET" });
      return handleModels(ctx);
    }
    if (path === "/health") return new Response(null, { status: 200 });
    return errorResponse(new LlmgwError("NOT_FOUND", `no route for ${req.method} ${path}`));
  };
}

export function startDataPlane(ctx: GatewayContext): Server<undefined> {
  const fetchHandler = createFetchHandler(ctx);
  return Bun.serve({
    hostname: ctx.config.listen.host,
    port: ctx.config.listen.port,
    // We read bodies ourselves under max_body_bytes to answer 413 in OpenAI's
    // shape; Bun's own limit is only a backstop far above it.
    maxRequestBodySize: ctx.config.maxBodyBytes * 4 + 1024 * 1024,
    idleTimeout: 120,
    fetch: fetchHandler,
    error(err) {
      ctx.log.error({ err }, "unhandled error in data plane");
      return errorResponse(new LlmgwError("INTERNAL_ERROR", "internal error"));
    },
  });
}
