/**
 * One inference request, top to bottom: the gates in the order of
 * DESIGN.md (auth → body → quota; idempotent replay, response cache and
 * batch shed slot in after quota, one file each), then the attempt loop —
 * admission and scoring, retries and fallbacks — which hands an open stream
 * to the relay. Every way out goes through the request's Exchange, whose
 * finish() runs once; nothing a client sends can throw out of here.
 */
import type { Server } from "bun";
import type { Route } from "../../metrics/names.ts";
import { prefixHashes } from "../../scheduling/prefix-hash.ts";
import { walkPrompt } from "../../scheduling/prompt-walk.ts";
import { asLlmgwError, LlmgwError } from "../../shared/errors.ts";
import type { GatewayContext } from "../context.ts";
import { authGate } from "../gates/auth.ts";
import { estimateFromWalk, quotaGate } from "../gates/quota.ts";
import { AttemptLoop } from "../proxy/attempts.ts";
import { Exchange } from "./exchange.ts";
import { parseInferenceBody, readBodyLimited } from "./parse.ts";

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

function requestIdOf(req: Request): string {
  const given = req.headers.get("x-request-id");
  return given && REQUEST_ID_RE.test(given) ? given : crypto.randomUUID();
}

/** A UTF-8 byte-order mark is legal before JSON text but Python's json (vLLM, SGLang) rejects it: never forward one. */
function withoutBom(raw: Uint8Array): Uint8Array {
  return raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf ? raw.subarray(3) : raw;
}

export async function handleInference(ctx: GatewayContext, req: Request, server: Server<undefined>, route: Route, path: string): Promise<Response> {
  const x = new Exchange(ctx, route, path, requestIdOf(req), req.signal);
  try {
    authGate(ctx, x, req.headers);
    await readRequest(ctx, x, req, route);
    quotaGate(ctx, x);
    // Long prefills send nothing for a while; Bun's idle timeout would cut
    // them. The attempt's own deadlines bound the request instead.
    server.timeout(req, 0);
    return await new AttemptLoop(ctx, x).run();
  } catch (err) {
    if (req.signal.aborted) return x.fail(new LlmgwError("INTERNAL_ERROR", "client went away while sending the body"), "cancelled");
    const e = asLlmgwError(err);
    if (e.code === "INTERNAL_ERROR") ctx.log.error({ err, request_id: x.requestId }, "request failed");
    return x.fail(e, e.code === "INVALID_API_KEY" || e.code === "RATE_LIMITED" ? "rejected" : e.status < 500 ? "client_error" : "upstream_error");
  }
}

/**
 * The body, read under the size limit and parsed once; the model resolved;
 * the prompt walked once for both the token estimate and the prefix hashes.
 */
async function readRequest(ctx: GatewayContext, x: Exchange, req: Request, route: Route): Promise<void> {
  const raw = withoutBom(await readBodyLimited(req, ctx.config.maxBodyBytes));
  const body = parseInferenceBody(raw, route);
  x.rawBody = raw;
  x.body = body;
  x.stream = body.stream === true;
  x.includeUsage = body.stream_options?.include_usage === true;
  x.choices = typeof body.n === "number" ? body.n : 1;
  const model = ctx.catalog.resolve(body.model);
  if (model === undefined) throw new LlmgwError("MODEL_NOT_FOUND", `The model '${body.model}' does not exist`, { param: "model" });
  x.setModel(model);
  const hashing = ctx.usesPrefixHashes && route !== "embeddings";
  const affinity = ctx.config.scheduling.prefixAffinity;
  const walk = walkPrompt(body, hashing ? affinity.blockChars * affinity.maxBlocks : 0);
  x.estTokens = estimateFromWalk(body, walk);
  if (hashing) x.prefixHashes = prefixHashes(walk.text, affinity.blockChars, affinity.maxBlocks);
}
