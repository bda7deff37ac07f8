/**
 * The attempt loop of one admitted request: take an endpoint, open the
 * upstream, and until the first byte has reached the client move a failed
 * attempt to another endpoint (excluding those that failed), then down the
 * model's fallback chain — within the retry budget and the attempt limit,
 * with jittered backoff, honouring an engine's Retry-After, never repeating a
 * request the engine rejected as invalid. A stream that opened is handed to
 * the relay, which owns it from then on.
 */
import type { SameEndpointPolicy } from "../../config/retry-policy.ts";
import type { Config } from "../../config/types.ts";
import type { AdmissionRejection } from "../../metrics/names.ts";
import type { GatewayMetrics } from "../../metrics/registry.ts";
import { LlmgwError } from "../../shared/errors.ts";
import type { AdmissionClient } from "../admission-client.ts";
import { type Grant, SchedulerRejection } from "../admission-client.ts";
import type { CircuitBreakers } from "../circuit-breaker.ts";
import type { StreamRecoveryDeps } from "../continuation/stream-recovery.ts";
import { StreamRecovery } from "../continuation/stream-recovery.ts";
import type { ContinuationPolicy } from "../continuation-policy.ts";
import type { EndpointRegistry } from "../endpoints.ts";
import type { ModelCatalog } from "../model-catalog.ts";
import { attemptVerdict } from "../proxy/attempt-verdict.ts";
import { engineError, FAILURE_CODE, isContextLengthError, rejectedResponse } from "../proxy/failures.ts";
import { relayAnswer, usageFromTail } from "../proxy/json-answer.ts";
import { relayBody } from "../proxy/sse-response.ts";
import { answerToolCalls } from "../proxy/stream-dialect.ts";
import { type AttemptFailed, type AttemptResult, openUpstream } from "../proxy/upstream.ts";
import type { Exchange } from "../request/exchange.ts";
import { TRANSLATED_ROUTES } from "../request/messages-to-chat.ts";
import type { ParsedRequest } from "../request/parse.ts";
import type { RetryBudget } from "../retry-budget.ts";
import type { RouteSupport } from "../route-support.ts";
import type { UpstreamDial, UpstreamFetch } from "../upstream-reach.ts";
import type { ContinuationOpenerDeps } from "./continuation-attempt.ts";
import { continuationOpener } from "./continuation-attempt.ts";
import { type Translation, translatedAnswer, translatedBody, translatedStream, translatedWhole } from "./messages-translation.ts";

/** What the attempt loop uses itself: admission and scoring, the retry settings and budget, the fallback chains, which endpoint serves which route, how to reach an engine, and its metrics. */
interface AttemptLoopOwnDeps {
  readonly config: Pick<Config, "retry" | "maxResponseBytes" | "admission">;
  readonly catalog: Pick<ModelCatalog, "deadlinesFor" | "fallbacksOf">;
  readonly budget: Pick<RetryBudget, "deposit" | "tryWithdraw">;
  readonly metrics: Pick<
    GatewayMetrics,
    "admissionRejections" | "admissionWait" | "fallbacks" | "filterDrops" | "grantSeries" | "retries" | "sameEndpointRetries"
  >;
  readonly admission: Pick<AdmissionClient, "admit" | "reschedule" | "release">;
  readonly routes: Pick<RouteSupport, "learn" | "limited" | "serves">;
  readonly endpoints: Pick<EndpointRegistry, "idOf" | "urlOf" | "upstreamHeadersOf">;
  readonly breakers: Pick<CircuitBreakers, "abandon">;
  readonly continuation: Pick<ContinuationPolicy, "enabled">;
  readonly dial: UpstreamDial;
  readonly upstreamFetch?: UpstreamFetch;
  /** A tenant as a metric label (configured tenants by name, others as "other"). */
  tenantLabel(tenant: string): string;
}

/** The attempt loop's dependencies: its own, and those of the stream recovery and the continuation opener it hands streams to. */
export type AttemptLoopDeps = AttemptLoopOwnDeps & StreamRecoveryDeps & ContinuationOpenerDeps;

import { noReadyEndpoint } from "./no-ready-endpoint.ts";
import { upstreamBody } from "./upstream-body.ts";

/** What to do after a failed attempt. */
type Next = "retry" | "next_model" | "give_up";

/** Refusals that stay the answer when nothing else is ready afterwards: they say more than NO_READY_ENDPOINT. */
const KEPT_REFUSALS: ReadonlySet<string> = new Set(["ROUTE_NOT_SERVED", "UPSTREAM_UNAUTHORIZED"]);

const CANCELLED = () => new LlmgwError("INTERNAL_ERROR", "client went away");

/** An OpenAI-shaped answer's usage object sits within its last bytes: only they are read (a 200 MB embeddings answer is never parsed). */
const USAGE_TAIL_BYTES = 16 * 1024;

/** When a failure is retried on the endpoint that failed (retry.same_endpoint); classes not listed never are. */
function sameEndpointPolicy(ctx: AttemptLoopDeps, failure: AttemptFailed["failure"]): SameEndpointPolicy {
  const policies: Readonly<Record<string, SameEndpointPolicy>> = ctx.config.retry.sameEndpoint;
  return policies[failure] ?? "never";
}

/** Waiting out a cool-down ends this long after it, so the circuit's own timer has closed it. */
const COOL_DOWN_MARGIN_MS = 5;

/** Sleep `ms`, or less if `signal` aborts; false when it did. */
function sleepUnless(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

export class AttemptLoop {
  /** The last failure, reported when every attempt failed. */
  private last: AttemptFailed | LlmgwError | undefined;
  /** Whether the request has been through admission (only its first grant is). */
  private admitted = false;
  /** The backoff slept before the current attempt, ms (counts toward a Retry-After). */
  private backedOffMs = 0;
  /** The model and its fallbacks, in order; the one being tried. */
  private chain: readonly string[] = [];
  private at = 0;
  /** Where this route goes, translated, on an endpoint that does not serve it (the Messages API's routes; undefined for every other). */
  private readonly translation: Translation | undefined;

  constructor(
    private readonly ctx: AttemptLoopDeps,
    private readonly x: Exchange,
    private readonly request: ParsedRequest,
  ) {
    this.translation = TRANSLATED_ROUTES[x.route];
  }

  async run(): Promise<Response> {
    const { ctx, request } = this;
    const chain = [request.model, ...ctx.catalog.fallbacksOf(request.model)];
    this.chain = chain;
    ctx.budget.deposit();
    for (let m = 0; m < chain.length; m++) {
      this.at = m;
      if (m > 0) ctx.metrics.fallbacks.inc({ from_model: request.model, to_model: chain[m]! });
      const outcome = await this.tryModel(chain[m]!, m < chain.length - 1);
      if (outcome instanceof Response) return outcome;
      if (outcome === "give_up") break;
    }
    return this.giveUp();
  }

  /** Up to max_attempts on one model's endpoints; a Response, or where to go next. */
  private async tryModel(model: string, hasFallback: boolean): Promise<Response | Next> {
    const { ctx, x } = this;
    const deadlines = ctx.catalog.deadlinesFor(model);
    const exclude = new Set<number>();
    for (let a = 0; a < ctx.config.retry.maxAttempts; a++) {
      if (x.signal.aborted) return x.fail(CANCELLED(), "cancelled");
      if (x.attempts > 0 && !(await this.mayRetry(deadlines.totalMs))) return "give_up";
      const totalLeftMs = x.totalLeftMs(deadlines.totalMs);
      if (totalLeftMs <= 0)
        return x.fail(new LlmgwError("UPSTREAM_TOTAL_TIMEOUT", "the request exceeded its total deadline before an engine answered"), "timeout");
      let grant = await this.grant(model, exclude, !hasFallback);
      if (grant === undefined && exclude.size > 0) grant = await this.sameEndpointAgain(model, exclude, deadlines.totalMs, hasFallback);
      if (grant instanceof Response) return grant;
      if (grant === undefined) return "next_model";
      x.hold(grant, model);
      x.sending();
      const via = this.translation !== undefined && !ctx.routes.serves(ctx.endpoints.idOf(grant.index) ?? "", x.route, x.path) ? this.translation : undefined;
      const stream = this.request.stream && via?.route !== "tokenize";
      const url = ctx.endpoints.urlOf(grant.index)!;
      const headers: Record<string, string> = {
        // The endpoint's own credentials (never the client's Authorization, which is llmgw's key).
        ...ctx.endpoints.upstreamHeadersOf(grant.index),
        "content-type": this.request.contentType,
        accept: stream ? "text/event-stream" : "application/json",
        "x-request-id": x.requestId,
      };
      if (x.trace !== undefined) x.trace.attempt(headers, url, x.endpointId, model);
      const result = await openUpstream(
        {
          index: grant.index,
          url,
          body: via === undefined ? upstreamBody(x, this.request, model) : translatedBody(this.request, model, via),
          headers,
          stream,
          deadlines,
          totalLeftMs,
          clientSignal: x.signal,
          dial: ctx.dial,
          fetch: ctx.upstreamFetch,
          maxResponseBytes: ctx.config.maxResponseBytes,
          route: via?.route ?? x.route,
        },
        via?.path ?? x.path,
      );
      if (result.ok) return this.answer(result, grant.index, via);
      const next = this.failed(result, grant, exclude, hasFallback, via);
      if (next instanceof Response || next !== "retry") return next;
    }
    return "next_model";
  }

  /** Before a retry: the deadline, the retry budget, then backoff. */
  private async mayRetry(totalMs: number): Promise<boolean> {
    const { ctx, x } = this;
    if (x.totalLeftMs(totalMs) <= 0) return false;
    if (!ctx.budget.tryWithdraw()) {
      this.last ??= new LlmgwError("RETRY_BUDGET_EXHAUSTED", "retry budget exhausted");
      return false;
    }
    const last = this.last;
    const reason = last === undefined || last instanceof LlmgwError || last.failure === "cancelled" ? "connect" : last.failure;
    ctx.metrics.retries.inc({ model: this.request.model, reason });
    // Backoff with full jitter; endpoints that failed are excluded anyway,
    // so this only spaces retries out when the whole pool is struggling.
    const backoff = ctx.config.retry.backoffMs * 2 ** Math.max(0, x.attempts - 1) * Math.random();
    this.backedOffMs = backoff >= 1 ? backoff : 0;
    if (backoff >= 1) await Bun.sleep(backoff);
    return true;
  }

  /**
   * No other endpoint is left for this model: try the one that failed again,
   * as its failure class allows (retry.same_endpoint: before the fallback, or
   * only when no fallback is left — a headers or first-token timeout moves on
   * at once), after max(backoff, its Retry-After) — when that wait is within
   * retry.max_retry_after_ms and the total deadline (a 429 asking for 2 s is
   * retried about 2 s later, not at once and not never). undefined: fall back.
   */
  private async sameEndpointAgain(model: string, exclude: Set<number>, totalMs: number, hasFallback: boolean): Promise<Grant | Response | undefined> {
    const { ctx, x } = this;
    const last = this.last;
    if (last === undefined || last instanceof LlmgwError) return undefined;
    const policy = sameEndpointPolicy(ctx, last.failure);
    if (policy === "never" || (policy === "last_resort" && hasFallback)) return undefined;
    // A 429 cools the model down on that endpoint for its Retry-After (or
    // max_retry_after_ms without one): wait that out, a little past it.
    const max = ctx.config.retry.maxRetryAfterMs;
    const retryAfter = last.retryAfterMs ?? (last.failure === "status_429" ? max : 0);
    if (retryAfter > max) return undefined;
    const wait = retryAfter > 0 ? Math.max(0, retryAfter - this.backedOffMs) + COOL_DOWN_MARGIN_MS : 0;
    if (wait >= x.totalLeftMs(totalMs)) return undefined;
    if (wait >= 1 && !(await sleepUnless(wait, x.signal))) return x.fail(CANCELLED(), "cancelled");
    exclude.clear();
    ctx.metrics.sameEndpointRetries.inc({ model: this.request.model, reason: last.failure });
    return this.grant(model, exclude, !hasFallback);
  }

  /**
   * An endpoint for the next attempt: through admission the first time (it
   * may wait in its band's queue), by scoring alone afterwards. undefined:
   * nothing (else) is ready for this model. `lastResort`: no fallback is
   * left, so a half-open circuit another request is probing takes this one
   * too rather than turning it away.
   */
  private async grant(model: string, exclude: ReadonlySet<number>, lastResort: boolean): Promise<Grant | Response | undefined> {
    const { ctx, x } = this;
    const first = !this.admitted;
    try {
      let grant: Grant;
      if (first) {
        this.admitted = true;
        x.trace?.admitting(x.bandName);
        const g = ctx.admission.admit(
          { model, band: x.band, tenant: x.tenant, estTokens: x.estTokens, ...x.routingKeys() },
          x.signal,
          ctx.config.admission.fastPath,
        );
        grant = g instanceof Promise ? await g : g;
        const series = ctx.metrics.grantSeries(x.bandName, ctx.tenantLabel(x.tenant));
        series.wait.observe(grant.waitedMs / 1000);
        series.grant.inc();
        series.path[grant.path].inc();
      } else {
        grant = ctx.admission.reschedule(model, x.band, x.routingKeys(), exclude, lastResort);
      }
      this.observeDrops(grant.drops);
      if (x.signal.aborted) {
        x.hold(grant, model);
        return x.fail(CANCELLED(), "cancelled");
      }
      return ctx.routes.limited ? this.servingRoute(grant, model, exclude) : grant;
    } catch (err) {
      x.trace?.unscheduled(err instanceof LlmgwError ? err.code : "INTERNAL_ERROR");
      if (err instanceof SchedulerRejection) this.observeDrops(err.drops);
      if (x.signal.aborted) {
        if (first) this.rejectedAdmission(performance.now() - x.arrivedAt, "cancelled");
        return x.fail(CANCELLED(), "cancelled");
      }
      if (err instanceof SchedulerRejection && (err.code === "ADMISSION_QUEUE_FULL" || err.code === "ADMISSION_TTL_EXPIRED")) {
        this.rejectedAdmission(err.waitedMs, err.code === "ADMISSION_QUEUE_FULL" ? "queue_full" : "ttl_expired");
        return x.fail(err, err.code === "ADMISSION_QUEUE_FULL" ? "rejected" : "timeout");
      }
      // Admission found nothing free for this model: as a last resort, a probed half-open circuit.
      if (first && lastResort && err instanceof SchedulerRejection && err.code === "NO_READY_ENDPOINT") {
        const joined = this.joinProbed(model, exclude);
        if (joined !== undefined) return ctx.routes.limited ? this.servingRoute(joined, model, exclude) : joined;
      }
      // Nothing (else) ready for this model: an engine's own failure stays the one to report.
      // (Nor does "no endpoint serves the route", or "an engine refused our key", give way to "none is ready".)
      if (this.last === undefined || (this.last instanceof LlmgwError && !KEPT_REFUSALS.has(this.last.code)))
        this.last = err instanceof LlmgwError ? err : new LlmgwError("NO_READY_ENDPOINT", String(err));
      return undefined;
    }
  }

  /** A first admission that found only half-open circuits being probed: join one (undefined: none). */
  private joinProbed(model: string, exclude: ReadonlySet<number>): Grant | undefined {
    try {
      const grant = this.ctx.admission.reschedule(model, this.x.band, this.x.routingKeys(), exclude, true);
      this.observeDrops(grant.drops);
      return grant;
    } catch {
      return undefined;
    }
  }

  /**
   * An endpoint that does not serve this request's route (its config says
   * so, or it answered the path with a route-missing 404) is never sent it:
   * the grant is given back and another endpoint scored in its place.
   * undefined: no ready endpoint of the model serves the route.
   */
  private servingRoute(grant: Grant, model: string, exclude: ReadonlySet<number>): Grant | undefined {
    const { ctx, x } = this;
    const alt = this.translation;
    const serves = (g: Grant) => {
      const id = ctx.endpoints.idOf(g.index) ?? "";
      return ctx.routes.serves(id, x.route, x.path) || (alt !== undefined && ctx.routes.serves(id, alt.route, alt.path));
    };
    const skip = new Set(exclude);
    while (!serves(grant)) {
      skip.add(grant.index);
      ctx.admission.release(grant, x.band);
      if (grant.probe >= 0) ctx.breakers.abandon(grant.index, grant.probe);
      try {
        grant = ctx.admission.reschedule(model, x.band, x.routingKeys(), skip);
      } catch {
        this.last = new LlmgwError("ROUTE_NOT_SERVED", `no ready endpoint of model '${model}' serves ${x.path}`);
        return undefined;
      }
    }
    return grant;
  }

  /** The engine answered: a complete JSON body, or a stream for the relay. */
  private answer(result: Exclude<AttemptResult, AttemptFailed>, slot: number, via: Translation | undefined): Response {
    const { ctx, x } = this;
    x.answered();
    if (result.kind === "json") {
      x.usage = usageFromTail(result.body.subarray(-USAGE_TAIL_BYTES));
      x.trace?.answerBody(result.body);
      let body = result.body;
      if (via !== undefined) {
        const translated = translatedAnswer(body, via);
        if (translated === undefined) {
          x.endAttempt({ kind: "fault", failure: "malformed" });
          return x.fail(new LlmgwError("UPSTREAM_MALFORMED", `the engine's answer on ${via.path} could not be read as one`), "upstream_error");
        }
        body = translated;
      }
      if (x.offersTools) x.toolCalls = answerToolCalls(body, x.route);
      x.endAttempt({ kind: "neutral" });
      // Built before the audit line is written: nothing that can fail comes after an "ok".
      const headers = { "content-type": result.contentType, ...x.headers(true) };
      x.finish("ok", 200);
      return new Response(body, { status: 200, headers });
    }
    if (result.kind === "json-stream") {
      const body = relayAnswer(x, result.answer, ctx.config.maxResponseBytes);
      return new Response(via === undefined ? body : translatedWhole(body, via), {
        status: 200,
        headers: { "content-type": result.contentType, ...x.headers(true) },
      });
    }
    x.trace?.firstEvent(result.firstEvents[0]!.bytes);
    // A stream that breaks after its first byte may be continued elsewhere: on this model, then down the chain.
    const recovery = ctx.continuation.enabled
      ? StreamRecovery.for(ctx, x, this.request, continuationOpener(ctx, x), this.chain.slice(this.at), slot)
      : undefined;
    const relayed = relayBody(x, result, recovery);
    const body = via === undefined ? relayed : translatedStream(relayed, x);
    return new Response(body, {
      status: 200,
      headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", ...x.headers(true) },
    });
  }

  /** Record a failed attempt against its endpoint and decide where the request goes next. */
  private failed(result: AttemptFailed, grant: Grant, exclude: Set<number>, hasFallback: boolean, via: Translation | undefined): Response | Next {
    const { ctx, x } = this;
    if (result.failure === "cancelled") {
      x.endAttempt({ kind: "neutral" });
      return x.fail(CANCELLED(), "cancelled");
    }
    this.last = result;
    exclude.add(grant.index);
    const failure = result.failure;
    x.endAttempt(attemptVerdict(result, ctx.config.retry.maxRetryAfterMs));
    if (failure === "status_4xx") {
      const { message } = engineError(result.body);
      if (isContextLengthError(message) && hasFallback) return "next_model";
      // 404: this endpoint does not (or no longer) serve the model — its
      // model list changed since the last poll — or does not have the route
      // at all (learned: it is never sent that path again). Another endpoint may.
      // 401/403: the engine refused llmgw's own credentials (its api_key_env or api_key_file), which says nothing
      // about the client's request; another endpoint may hold the right key. Never passed on as the client's 401.
      if (result.status === 401 || result.status === 403) {
        const id = ctx.endpoints.idOf(grant.index) ?? String(grant.index);
        this.last = new LlmgwError(
          "UPSTREAM_UNAUTHORIZED",
          `endpoint '${id}' refused the gateway's credentials (HTTP ${result.status}): set its api_key_env or api_key_file to the engine's key`,
        );
        return "retry";
      }
      if (result.status === 404) {
        const path = via?.path ?? x.path;
        if (ctx.routes.learn(x.endpointId ?? "", path, result.body)) {
          this.last = new LlmgwError("ROUTE_NOT_SERVED", `no ready endpoint of model '${this.request.model}' serves ${path}`);
          // A Messages route it lacks: the same endpoint is asked again, translated.
          if (via === undefined && this.translation !== undefined) exclude.delete(grant.index);
        }
        return "retry";
      }
      const status = result.status ?? 400;
      const response = rejectedResponse(status, result.body, x.headers(true));
      x.finish("client_error", status, message, isContextLengthError(message) ? "CONTEXT_LENGTH_EXCEEDED" : "UPSTREAM_REJECTED");
      return response;
    }
    // The whole request is out of time, or its answer is too large for any endpoint: no retry can help.
    return failure === "total_timeout" || failure === "too_large" ? "give_up" : "retry";
  }

  /** Every attempt failed: the last failure, in our error shape. */
  private giveUp(): Response {
    const { x, request } = this;
    const last = this.last;
    if (last === undefined) return x.fail(noReadyEndpoint(request.model), "no_endpoint");
    if (last instanceof LlmgwError) {
      if (last.code === "ROUTE_NOT_SERVED") return x.fail(last, "no_endpoint");
      if (last.code !== "NO_READY_ENDPOINT") return x.fail(last, "upstream_error");
      // The scheduler's message names the model it last tried; the client is told of the one it asked for.
      return x.fail(last.retryAfterS === undefined ? noReadyEndpoint(request.model) : last, "no_endpoint");
    }
    const failure = last.failure === "cancelled" ? "connect" : last.failure;
    const retryAfterS = last.retryAfterMs !== undefined ? last.retryAfterMs / 1000 : undefined;
    const detail = failure === "status_5xx" || failure === "status_429" ? `: ${engineError(last.body).message}` : "";
    const err = new LlmgwError(
      FAILURE_CODE[failure],
      `all ${x.attempts} attempt(s) failed; last: ${last.message}${detail}`,
      retryAfterS === undefined ? {} : { retryAfterS },
    );
    return x.fail(err, failure.endsWith("timeout") ? "timeout" : "upstream_error");
  }

  /** Admission metrics of a request turned away at its first scheduling decision. */
  private rejectedAdmission(waitedMs: number, reason: AdmissionRejection): void {
    const { ctx, x } = this;
    const band = x.bandName;
    ctx.metrics.admissionWait.observe({ band }, waitedMs / 1000);
    ctx.metrics.admissionRejections.inc({ band, reason });
  }

  private observeDrops(drops: Readonly<Record<string, number>>): void {
    for (const filter in drops) {
      const n = drops[filter]!;
      if (n > 0) this.ctx.metrics.filterDrops.inc({ filter }, n);
    }
  }
}
