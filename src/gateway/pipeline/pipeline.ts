/**
 * One inference request, top to bottom: the gates in the order of
 * DESIGN.md (auth → body → quota → idempotent replay → response cache →
 * batch shed, one file each), then the attempt loop — admission and scoring,
 * retries and fallbacks — which hands an open stream to the relay. Replays
 * and cache hits answer before the shed check and admission: they use no
 * GPU. Every way out goes through the request's Exchange, whose finish()
 * runs once, and through the answer recorders the gates asked for; nothing a
 * client sends can throw out of here. Batch lines come in here too, in
 * process (serve/batch-line-send.ts), with their batch's principal.
 */
import type { Server } from "bun";
import type { Route } from "../../metrics/names.ts";
import { prefixHashes } from "../../scheduling/prefix-hash.ts";
import { walkPrompt } from "../../scheduling/prompt-walk.ts";
import { asLlmgwError, LlmgwError } from "../../shared/errors.ts";
import type { GatewayContext } from "../context.ts";
import type { Principal } from "../api-keys.ts";
import { authGate } from "../gates/auth.ts";
import { adapterLoadGate } from "../gates/adapter-load.ts";
import { batchShedGate } from "../gates/batch-shed.ts";
import { idempotentReplayGate } from "../gates/idempotent-replay.ts";
import { quotaGate } from "../gates/quota.ts";
import { estimateFromWalk } from "../request/token-estimate.ts";
import { responseCacheGate } from "../gates/response-cache.ts";
import { AttemptLoop } from "./attempts.ts";
import { AnswerRecorders } from "../request/answer-recorders.ts";
import { Exchange } from "../request/exchange.ts";
import { parseInferenceBody, readBodyLimited } from "../request/parse.ts";

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

function requestIdOf(req: Request): string {
  const given = req.headers.get("x-request-id");
  return given && REQUEST_ID_RE.test(given) ? given : crypto.randomUUID();
}

/** A UTF-8 byte-order mark is legal before JSON text but Python's json (vLLM, SGLang) rejects it: never forward one. */
function withoutBom(raw: Uint8Array): Uint8Array {
  return raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf ? raw.subarray(3) : raw;
}

/** A request that did not come over HTTP: a batch line, run as its batch's tenant (authenticated when the batch was created). */
export interface InProcessOrigin {
  principal: Principal;
  batchId: string;
}

/** Refusals before any engine (the client may retry later): outcome "rejected", as admission's own. */
const REJECTIONS = new Set(["INVALID_API_KEY", "RATE_LIMITED", "GPU_SATURATED"]);

/** `server` is the data plane's (undefined for a batch line, which no idle timeout can cut). */
export async function handleInference(ctx: GatewayContext, req: Request, server: Server<undefined> | undefined, route: Route, path: string, origin?: InProcessOrigin): Promise<Response> {
  const x = new Exchange(ctx, route, path, requestIdOf(req), req.signal);
  const answer = new AnswerRecorders();
  try {
    if (origin === undefined) authGate(ctx, x, req.headers);
    else {
      x.principal = origin.principal;
      x.batchId = origin.batchId;
    }
    await readRequest(ctx, x, req, route);
    // Each gate is a promise only when it must wait (a shared quota asking
    // Redis, a key sent, a model opted in): the common request awaits nothing here.
    const quota = quotaGate(ctx, x);
    if (quota) await quota;
    const replay = idempotentReplayGate(ctx, x, req, answer);
    const replayed = replay && (await replay);
    if (replayed) return replayed;
    const lookup = responseCacheGate(ctx, x, answer);
    const cached = lookup && (await lookup);
    if (cached) return cached;
    batchShedGate(ctx, x);
    const adapterLoad = adapterLoadGate(ctx, x);
    if (adapterLoad) await adapterLoad;
    // Long prefills send nothing for a while; Bun's idle timeout would cut
    // them. The attempt's own deadlines bound the request instead.
    server?.timeout(req, 0);
    return answer.wrap(await new AttemptLoop(ctx, x).run());
  } catch (err) {
    if (req.signal.aborted) return answer.wrap(x.fail(new LlmgwError("INTERNAL_ERROR", "client went away while sending the body"), "cancelled"));
    const e = asLlmgwError(err);
    if (e.code === "INTERNAL_ERROR") ctx.log.error({ err, request_id: x.requestId }, "request failed");
    return answer.wrap(x.fail(e, REJECTIONS.has(e.code) ? "rejected" : e.status < 500 ? "client_error" : "upstream_error"));
  }
}

/**
 * The body, read under the size limit and parsed once; the model resolved;
 * the prompt walked once for both the token estimate and the prefix hashes.
 */
async function readRequest(ctx: GatewayContext, x: Exchange, req: Request, route: Route): Promise<void> {
  const raw = withoutBom(await readBodyLimited(req, ctx.config.maxBodyBytes, ctx.config.bodyReadTimeoutMs));
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
  x.promptEstimate = Math.ceil(walk.chars / 4) + walk.tokenIds;
  if (hashing) x.prefixHashes = prefixHashes(walk.text, affinity.blockChars, affinity.maxBlocks);
}
