/**
 * One inference request, top to bottom: the gates in the order
 * docs/architecture.md#one-request-end-to-end gives (auth → body → quota →
 * idempotent replay → response cache → batch shed, one file each) — for the
 * Responses API the conversation step between the body and the rest
 * (conversation-state.ts: a
 * previous_response_id expanded, a background response accepted, the answer
 * stored on its way out) — then the attempt loop — admission and scoring,
 * retries and fallbacks — which hands an open stream to the relay. Replays
 * and cache hits answer before the shed check and admission: they use no
 * GPU. Every way out goes through the request's Exchange, whose finish()
 * runs once, and through the answer recorders the gates asked for; nothing a
 * client sends can throw out of here. Batch lines come in here too, in
 * process (serve/batch-line-send.ts), with their batch's principal, and
 * background responses (serve/background-send.ts) with their creator's.
 */
import type { Server } from "bun";
import type { Config } from "../../config/types.ts";
import type { GatewayJobs } from "../../jobs/jobs-service.ts";
import type { Route } from "../../metrics/names.ts";
import { prefixHashes } from "../../scheduling/prefix-hash.ts";
import { walkPrompt } from "../../scheduling/prompt-walk.ts";
import { bodyDeadlines, bodyReadWhole } from "../../shared/bounded-body.ts";
import { asLlmgwError, LlmgwError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/logger.ts";
import { BudgetShare } from "../../shared/upload-budget.ts";
import type { RequestTracer } from "../../tracing/tracer-contract.ts";
import type { Principal } from "../api-keys.ts";
import type { ColdStartWaits } from "../cold-start-waits.ts";
import type { AdapterLoadGateDeps } from "../gates/adapter-load.ts";
import { adapterLoadGate } from "../gates/adapter-load.ts";
import type { AuthGateDeps } from "../gates/auth.ts";
import { AUTH_REFUSAL_HEADERS, authGate } from "../gates/auth.ts";
import type { ShedGateDeps } from "../gates/batch-shed.ts";
import { batchShedGate } from "../gates/batch-shed.ts";
import { type ColdStartGateDeps, coldStartGate } from "../gates/cold-start.ts";
import type { ReplayGateDeps } from "../gates/idempotent-replay.ts";
import { idempotentReplayGate } from "../gates/idempotent-replay.ts";
import { keyModelsGate } from "../gates/key-models.ts";
import type { QuotaGateDeps } from "../gates/quota.ts";
import { quotaGate } from "../gates/quota.ts";
import type { CacheGateDeps } from "../gates/response-cache.ts";
import { responseCacheGate } from "../gates/response-cache.ts";
import type { ModelCatalog } from "../model-catalog.ts";
import type { PromptTokenizer } from "../prompt-tokens.ts";
import { AnswerRecorders } from "../request/answer-recorders.ts";
import type { ExchangeDeps } from "../request/exchange.ts";
import { Exchange } from "../request/exchange.ts";
import { MultipartFields } from "../request/multipart-fields.ts";
import { type InferenceBody, type ParsedRequest, parsedRequest, parseInferenceBody, readBodyLimited } from "../request/parse.ts";
import { hashesPrefix, promptViewOf } from "../request/prompt-view.ts";
import { estimateFromWalk, promptEstimate } from "../request/token-estimate.ts";
import type { AttemptLoopDeps } from "./attempts.ts";
import { AttemptLoop } from "./attempts.ts";
import type { ConversationDeps } from "./conversation-state.ts";
import { type ConversationTarget, conversationStep } from "./conversation-state.ts";
import { noReadyEndpoint } from "./no-ready-endpoint.ts";

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

function requestIdOf(req: Request): string {
  const given = req.headers.get("x-request-id");
  return given && REQUEST_ID_RE.test(given) ? given : crypto.randomUUID();
}

/** A UTF-8 byte-order mark is legal before JSON text but Python's json (vLLM, SGLang) rejects it: never forward one. */
function withoutBom(raw: Uint8Array): Uint8Array {
  return raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf ? raw.subarray(3) : raw;
}

/** A request that did not come over HTTP: a batch line or a background response, run as its tenant (authenticated when it was created). */
interface InProcessOrigin {
  principal: Principal;
  batchId?: string;
  /** A background response being run: its answer is stored under this id. */
  conversation?: ConversationTarget;
}

/** What the parse step and the estimate use: the body limits, the catalog to resolve the model, the uploads' memory budget, the prefix settings. */
interface ParseDeps {
  readonly config: Pick<Config, "batch" | "bodyReadTimeoutMs" | "maxAudioBytes" | "maxBodyBytes" | "scheduling">;
  readonly catalog: Pick<ModelCatalog, "adapters" | "awaited" | "resolve">;
  readonly jobs: Pick<GatewayJobs, "uploadBudget">;
  /** Whether any configured scorer needs prompt-prefix hashes (skip hashing otherwise). */
  readonly usesPrefixHashes: boolean;
  readonly promptTokens: Pick<PromptTokenizer, "keysFor">;
  readonly log: Pick<Logger, "error">;
  /** A model the fleet scales to zero is known while no endpoint lists it (its requests wait at the cold-start gate). */
  readonly coldStarts?: Pick<ColdStartWaits, "waitFor">;
}

/** Tracing: present only while it is on. */
interface TracingDeps {
  readonly tracer?: RequestTracer;
}

/** The pipeline's dependencies: exactly those of its stages, each named by the stage that uses it. */
export type PipelineDeps = TracingDeps &
  AuthGateDeps &
  ParseDeps &
  ConversationDeps &
  QuotaGateDeps &
  ReplayGateDeps &
  CacheGateDeps &
  ShedGateDeps &
  AdapterLoadGateDeps &
  ColdStartGateDeps &
  ExchangeDeps &
  AttemptLoopDeps;

/** Refusals before any engine (the client may retry later): outcome "rejected", as admission's own. */
const REJECTIONS = new Set(["INVALID_API_KEY", "RATE_LIMITED", "GPU_SATURATED"]);

/** `server` is the data plane's (undefined for a batch line or a background response, which no idle timeout can cut). */
export async function handleInference(
  ctx: PipelineDeps,
  req: Request,
  server: Server<undefined> | undefined,
  route: Route,
  path: string,
  origin?: InProcessOrigin,
): Promise<Response> {
  const x = new Exchange(ctx, route, path, requestIdOf(req), req.signal);
  if (ctx.tracer !== undefined) x.trace = ctx.tracer.start(req.headers, route, path, x.requestId);
  const answer = new AnswerRecorders();
  let authenticated = false;
  let bodyRead = false;
  try {
    if (origin === undefined) x.principal = authGate(ctx, req.headers);
    else {
      x.principal = origin.principal;
      x.batchId = origin.batchId;
    }
    authenticated = true;
    let request = await readRequest(ctx, x, req, route);
    bodyRead = true;
    keyModelsGate(x.principal, request.body.model, request.model);
    if (route === "responses") {
      const next = await conversationStep(ctx, x, request, answer, origin?.conversation);
      if (next instanceof Response) return answer.wrap(next);
      request = next;
    }
    estimateRequest(ctx, x, request);
    // Each gate is a promise only when it must wait (a shared quota asking
    // Redis, a key sent, a model opted in): the common request awaits nothing here.
    const quota = quotaGate(ctx, x);
    if (quota) await quota;
    const replay = idempotentReplayGate(ctx, x, request, req, answer);
    const replayed = replay && (await replay);
    if (replayed) return replayed;
    const lookup = responseCacheGate(ctx, x, request, answer);
    const cached = lookup && (await lookup);
    if (cached) return cached;
    batchShedGate(ctx, x, request.model);
    // A model at zero first gets a replica; then an adapter of it can be loaded there.
    const coldStart = coldStartGate(ctx, x, request.model);
    if (coldStart) await coldStart;
    const adapterLoad = adapterLoadGate(ctx, x, request.model);
    if (adapterLoad) await adapterLoad;
    // Long prefills send nothing for a while; Bun's idle timeout would cut
    // them. The attempt's own deadlines bound the request instead.
    server?.timeout(req, 0);
    // The prompt's token ids for precise-prefix routing: cached, or asked of an engine within a time limit
    // (after the gates, so a replayed, cached or refused request asks for nothing).
    const tokenizing = ctx.promptTokens.keysFor(request.body, route, request.model, x.promptEstimate, ctx.catalog.adapters?.isAdapter(request.model) === true);
    x.tokenBlockKeys = tokenizing instanceof Promise ? await tokenizing : tokenizing;
    return answer.wrap(await new AttemptLoop(ctx, x, request).run());
  } catch (err) {
    if (req.signal.aborted) return answer.wrap(x.fail(new LlmgwError("INTERNAL_ERROR", "client went away while sending the body"), "cancelled"));
    const e = asLlmgwError(err);
    if (e.code === "INTERNAL_ERROR") ctx.log.error({ err, request_id: x.requestId }, "request failed");
    const res = answer.wrap(
      x.fail(e, REJECTIONS.has(e.code) ? "rejected" : e.code === "NO_READY_ENDPOINT" ? "no_endpoint" : e.status < 500 ? "client_error" : "upstream_error"),
    );
    // Refused before its body was read (no key, too large): close the connection rather than let Bun drain
    // a declared length a byte at a time — a client without a key must not be able to hold sockets open.
    if (!authenticated && origin === undefined) for (const [k, v] of Object.entries(AUTH_REFUSAL_HEADERS)) res.headers.set(k, v);
    else if (!bodyRead && origin === undefined && !bodyReadWhole(req)) res.headers.set("connection", "close");
    return res;
  }
}

/** The body, read under the size limit (a transcription's under max_audio_bytes) and parsed once; the model resolved. */
async function readRequest(ctx: ParseDeps, x: Exchange, req: Request, route: Route): Promise<ParsedRequest> {
  const multipart = route === "transcriptions";
  const deadlines = bodyDeadlines(ctx.config.bodyReadTimeoutMs, ctx.config.batch.uploadMinBytesPerS);
  // A transcription's form is held whole until an engine answers (a failed attempt goes to another endpoint):
  // it counts against the memory budget uploads share until the request finishes (Exchange.finish gives it back).
  let body: InferenceBody;
  let raw: Uint8Array;
  if (multipart) {
    const share = (x.heldBody = new BudgetShare(ctx.jobs.uploadBudget));
    const form = new MultipartFields(req.headers.get("content-type"));
    try {
      raw = await readBodyLimited(req, ctx.config.maxAudioBytes, deadlines, { hold: (bytes) => share.growTo(bytes), chunk: (c) => form.push(c) });
    } catch (err) {
      form.destroy();
      throw err;
    }
    body = await form.end();
  } else {
    raw = withoutBom(await readBodyLimited(req, ctx.config.maxBodyBytes, deadlines));
    body = parseInferenceBody(raw, route);
  }
  const model = ctx.catalog.resolve(body.model) ?? (ctx.coldStarts?.waitFor(body.model) !== undefined ? body.model : undefined);
  if (model === undefined) {
    // 404 only for a model nobody serves: an upstream that has not listed its models yet may serve it.
    if (ctx.catalog.awaited(body.model)) throw noReadyEndpoint(body.model, "its upstream has not listed its models yet (starting, or unreachable)");
    throw new LlmgwError("MODEL_NOT_FOUND", `The model '${body.model}' does not exist`, { param: "model" });
  }
  // A multipart body was read under its content type, so the header is there.
  const request = parsedRequest(body, raw, model, multipart ? (req.headers.get("content-type") ?? undefined) : undefined);
  x.parsed(request);
  return request;
}

/** The prompt (as the route's view of it: prompt-view.ts) walked once for both the token estimate and the prefix hashes. */
function estimateRequest(ctx: ParseDeps, x: Exchange, request: ParsedRequest): void {
  const { body, model } = request;
  const route = x.route;
  const hashing = ctx.usesPrefixHashes && hashesPrefix(route);
  const affinity = ctx.config.scheduling.prefixAffinity;
  const view = promptViewOf(route, body);
  const walk = walkPrompt(view, hashing ? affinity.blockChars * affinity.maxBlocks : 0);
  x.estTokens = estimateFromWalk(view, walk);
  x.promptEstimate = promptEstimate(walk);
  x.estimated();
  // A LoRA adapter's prompt is another prefix than the base model's (the engine keeps their blocks apart).
  if (hashing) x.prefixHashes = prefixHashes(walk.text, affinity.blockChars, affinity.maxBlocks, ctx.catalog.adapters?.isAdapter(model) ? model : undefined);
}
