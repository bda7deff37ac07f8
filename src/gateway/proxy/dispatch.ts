/**
 * Dispatch with retries and fallbacks: ask the scheduler for an endpoint,
 * make one attempt, and until the first byte has reached the client, move a
 * failed attempt to another endpoint (excluding those that failed), then down
 * the model's fallback chain — within a retry budget, with backoff, honouring
 * an engine's Retry-After, never repeating a request the engine rejected as
 * invalid. After the first byte, the SSE relay owns the request.
 */
import type { AdmissionRejection, AttemptFailure, Outcome, Route } from "../../metrics/names.ts";
import { I } from "../../shared/endpoint-table.ts";
import { LlmgwError, errorResponse, type ErrorCode } from "../../shared/errors.ts";
import type { GatewayContext } from "../context.ts";
import type { InferenceBody } from "../request-parse.ts";
import { SchedulerRejection, type Grant } from "../scheduler-client.ts";
import { relayStream, type RelayEnd, type Usage } from "./sse-relay.ts";
import { attemptUpstream, type AttemptFailed } from "./upstream.ts";

export interface InferenceRequest {
  route: Route;
  path: string;
  body: InferenceBody;
  /** The client's original bytes, forwarded as they are when nothing must change. */
  rawBody: Uint8Array;
  /** Canonical model (alias resolved). */
  model: string;
  stream: boolean;
  /** The client asked for stream_options.include_usage. */
  includeUsage: boolean;
  prefixHashes: number[];
  requestId: string;
  /** performance.now() at arrival. */
  arrivedAt: number;
  signal: AbortSignal;
  /** Admission: band index, tenant, estimated tokens. */
  band: number;
  tenant: string;
  estTokens: number;
}

/** How a request ended, reported once for metrics and the audit line. */
export interface Finish {
  outcome: Outcome;
  status: number;
  endpoint: string | undefined;
  attempts: number;
  usage: Usage | undefined;
  error: string | undefined;
}

const FAILURE_CODE: Record<AttemptFailure, ErrorCode> = {
  connect: "UPSTREAM_CONNECT_FAILED",
  headers_timeout: "UPSTREAM_HEADERS_TIMEOUT",
  first_token_timeout: "UPSTREAM_FIRST_TOKEN_TIMEOUT",
  idle_timeout: "UPSTREAM_IDLE_TIMEOUT",
  total_timeout: "UPSTREAM_TOTAL_TIMEOUT",
  status_5xx: "UPSTREAM_ERROR",
  status_429: "UPSTREAM_RATE_LIMITED",
  status_4xx: "UPSTREAM_REJECTED",
  malformed: "UPSTREAM_MALFORMED",
  too_large: "UPSTREAM_RESPONSE_TOO_LARGE",
  truncated: "UPSTREAM_STREAM_TRUNCATED",
};

/** Failures that say something about the endpoint's health (the circuit breaker counts these). */
const ENDPOINT_FAULTS = new Set<AttemptFailure>(["connect", "headers_timeout", "first_token_timeout", "status_5xx", "truncated", "malformed", "idle_timeout", "total_timeout"]);

const CONTEXT_LENGTH_RE = /context length|max_model_len|maximum model length|too long|context window/i;

function engineError(body: Uint8Array | undefined): { message: string; param: string | null } {
  if (!body) return { message: "engine rejected the request", param: null };
  const text = new TextDecoder().decode(body);
  try {
    const json = JSON.parse(text) as { error?: { message?: unknown; param?: unknown }; message?: unknown };
    const message = json.error?.message ?? json.message;
    const param = json.error?.param;
    return { message: typeof message === "string" ? message : text.slice(0, 500), param: typeof param === "string" ? param : null };
  } catch {
    return { message: text.slice(0, 500) || "engine rejected the request", param: null };
  }
}

/** An engine's 4xx, passed to the client with the engine's status and message in our error shape. */
function rejectedResponse(f: AttemptFailed, headers: Record<string, string>): Response {
  const { message, param } = engineError(f.body);
  const code: ErrorCode = CONTEXT_LENGTH_RE.test(message) ? "CONTEXT_LENGTH_EXCEEDED" : "UPSTREAM_REJECTED";
  const body = { error: { message, type: "invalid_request_error", param, code } };
  return new Response(JSON.stringify(body), { status: f.status ?? 400, headers: { "content-type": "application/json", ...headers } });
}

const USAGE_MEMBER = new TextEncoder().encode('"stream_options":{"include_usage":true},');

function bodyFor(req: InferenceRequest, model: string): Uint8Array | string {
  const renamed = model !== req.body.model;
  // Ask the engine for usage on every stream: token accounting needs it; the
  // relay drops the usage chunk again if the client did not ask for it.
  const addUsage = req.stream && !req.includeUsage;
  if (!renamed && !addUsage) return req.rawBody;
  if (!renamed && req.body.stream_options === undefined) {
    // The common case: splice one member in after the opening brace instead
    // of re-serialising the whole (possibly long) prompt. The body parsed as
    // a JSON object, so its first non-blank byte is '{'.
    const raw = req.rawBody;
    const at = raw.indexOf(123 /* { */) + 1;
    const out = new Uint8Array(raw.length + USAGE_MEMBER.length);
    out.set(raw.subarray(0, at), 0);
    out.set(USAGE_MEMBER, at);
    out.set(raw.subarray(at), at + USAGE_MEMBER.length);
    // "{}" cannot happen (model is required), so a member follows the comma.
    return out;
  }
  const out: InferenceBody = { ...req.body, model };
  if (addUsage) out.stream_options = { ...(req.body.stream_options ?? {}), include_usage: true };
  return JSON.stringify(out);
}

function usageOf(json: Uint8Array): Usage | undefined {
  try {
    const u = (JSON.parse(new TextDecoder().decode(json)) as { usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } }).usage;
    if (!u) return undefined;
    return {
      prompt_tokens: typeof u.prompt_tokens === "number" ? u.prompt_tokens : 0,
      completion_tokens: typeof u.completion_tokens === "number" ? u.completion_tokens : 0,
    };
  } catch {
    return undefined;
  }
}

/** Admission metrics for a request's first scheduling decision. */
function observeAdmission(ctx: GatewayContext, req: InferenceRequest, waitedMs: number, rejected: AdmissionRejection | undefined): void {
  const band = ctx.config.admission.bands[req.band]?.name ?? "unknown";
  ctx.metrics.admissionWait.observe({ band }, waitedMs / 1000);
  if (rejected) ctx.metrics.admissionRejections.inc({ band, reason: rejected });
  else ctx.metrics.admissionGrants.inc({ band, tenant: ctx.tenantLabel(req.tenant) });
}

export async function dispatchInference(
  ctx: GatewayContext,
  req: InferenceRequest,
  finish: (f: Finish) => void,
  extraHeaders: Record<string, string> = {},
): Promise<Response> {
  const { config, catalog, table, scheduler, breakers, metrics } = ctx;
  const baseHeaders: Record<string, string> = { ...extraHeaders, "x-request-id": req.requestId };
  const chain = [req.model, ...catalog.fallbacksOf(req.model)];
  ctx.budget.deposit();

  let attempts = 0;
  let last: AttemptFailed | LlmgwError | undefined;
  let lastEndpoint: string | undefined;
  const fail = (err: LlmgwError, outcome: Outcome): Response => {
    finish({ outcome, status: err.status, endpoint: lastEndpoint, attempts, usage: undefined, error: err.message });
    return errorResponse(err, { ...baseHeaders, "x-llmgw-attempts": String(attempts) });
  };

  chain: for (let m = 0; m < chain.length; m++) {
    const model = chain[m]!;
    if (m > 0) metrics.fallbacks.inc({ from_model: req.model, to_model: model });
    const deadlines = catalog.deadlinesFor(model);
    const exclude: number[] = [];
    for (let a = 0; a < config.retry.maxAttempts; a++) {
      if (req.signal.aborted) return fail(new LlmgwError("INTERNAL_ERROR", "client went away"), "cancelled");
      if (attempts > 0) {
        if (deadlines.totalMs - (performance.now() - req.arrivedAt) <= 0) break chain;
        if (!ctx.budget.tryWithdraw()) {
          last ??= new LlmgwError("RETRY_BUDGET_EXHAUSTED", "retry budget exhausted");
          break chain;
        }
        const reason = last instanceof LlmgwError || last === undefined ? "connect" : last.failure === "cancelled" ? "connect" : last.failure;
        metrics.retries.inc({ model: req.model, reason });
        // Backoff with full jitter; endpoints that failed are excluded anyway,
        // so this only spaces retries out when the whole pool is struggling.
        const backoff = config.retry.backoffMs * 2 ** Math.max(0, attempts - 1) * Math.random();
        if (backoff >= 1) await Bun.sleep(backoff);
      }
      const totalLeftMs = deadlines.totalMs - (performance.now() - req.arrivedAt);
      if (totalLeftMs <= 0) return fail(new LlmgwError("UPSTREAM_TOTAL_TIMEOUT", "the request exceeded its total deadline before an engine answered"), "timeout");

      let grant: Grant;
      const onDrops = (drops: Record<string, number>) => {
        for (const [filter, n] of Object.entries(drops)) if (n > 0) metrics.filterDrops.inc({ filter }, n);
      };
      try {
        // The first attempt goes through admission (it may wait in its band's
        // queue); retries and fallbacks of an admitted request only score.
        grant =
          attempts === 0 && m === 0
            ? await scheduler.admit({ model, band: req.band, tenant: req.tenant, estTokens: req.estTokens, prefixHashes: req.prefixHashes }, req.signal, onDrops)
            : await scheduler.schedule(model, req.prefixHashes, exclude, req.signal, onDrops);
        if (attempts === 0 && m === 0) observeAdmission(ctx, req, grant.waitedMs, undefined);
      } catch (err) {
        if (req.signal.aborted) {
          if (attempts === 0 && m === 0) observeAdmission(ctx, req, performance.now() - req.arrivedAt, "cancelled");
          return fail(new LlmgwError("INTERNAL_ERROR", "client went away"), "cancelled");
        }
        if (err instanceof SchedulerRejection && (err.code === "ADMISSION_QUEUE_FULL" || err.code === "ADMISSION_TTL_EXPIRED")) {
          observeAdmission(ctx, req, err.waitedMs, err.code === "ADMISSION_QUEUE_FULL" ? "queue_full" : "ttl_expired");
          return fail(err, err.code === "ADMISSION_QUEUE_FULL" ? "rejected" : "timeout");
        }
        // Nothing (else) ready for this model: try the next one in the chain.
        if (attempts === 0 || !(last && !(last instanceof LlmgwError))) last = err instanceof LlmgwError ? err : new LlmgwError("NO_READY_ENDPOINT", String(err));
        continue chain;
      }
      const index = grant.index;
      if (req.signal.aborted) {
        table.addInt(index, I.LEASED, -1);
        if (grant.probe) breakers.abandon(index);
        return fail(new LlmgwError("INTERNAL_ERROR", "client went away"), "cancelled");
      }
      for (const [scorer, score] of Object.entries(grant.scores)) metrics.scorerScore.observe({ scorer }, score);
      // Lease → inflight, in this order: the scheduler worker may read between
      // the two steps, and a transient over-count is safe where an
      // under-count would let one request too many through.
      table.addInt(index, I.INFLIGHT, 1);
      table.addInt(index, I.LEASED, -1);
      attempts++;
      const endpoint = config.endpoints[index]!;
      lastEndpoint = endpoint.id;

      let result: Awaited<ReturnType<typeof attemptUpstream>>;
      try {
        result = await attemptUpstream(
        {
          index,
          url: endpoint.url,
          body: bodyFor(req, model),
          headers: { "content-type": "application/json", accept: req.stream ? "text/event-stream" : "application/json", "x-request-id": req.requestId },
          stream: req.stream,
          deadlines,
          totalLeftMs,
          clientSignal: req.signal,
          dial: ctx.dial,
          maxResponseBytes: config.maxResponseBytes,
          onSend: attempts === 1 ? () => metrics.overhead.observe((performance.now() - req.arrivedAt) / 1000) : undefined,
        },
          req.path,
        );
      } catch (err) {
        // attemptUpstream classifies every upstream failure itself; anything
        // thrown here is a bug, and must not leak the count or the probe slot.
        table.addInt(index, I.INFLIGHT, -1);
        if (grant.probe) breakers.abandon(index);
        throw err;
      }

      if (result.ok) {
        breakers.success(index);
        const headers = { ...baseHeaders, "x-llmgw-endpoint": endpoint.id, "x-llmgw-attempts": String(attempts) };
        if (result.kind === "json") {
          table.addInt(index, I.INFLIGHT, -1);
          finish({ outcome: "ok", status: 200, endpoint: endpoint.id, attempts, usage: usageOf(result.body), error: undefined });
          return new Response(result.body, { status: 200, headers: { "content-type": result.contentType, ...headers } });
        }
        let usage: Usage | undefined;
        let lastEventAt = performance.now();
        const series = metrics.modelSeries(req.model);
        series.ttft.observe((lastEventAt - req.arrivedAt) / 1000);
        const body = relayStream(result, {
          includeUsage: req.includeUsage,
          onEvent() {
            const now = performance.now();
            series.interToken.observe((now - lastEventAt) / 1000);
            lastEventAt = now;
          },
          onUsage(u) {
            usage = u;
          },
          onMalformed() {
            metrics.malformedEvents.inc({ endpoint: endpoint.id });
          },
          onEnd(end: RelayEnd) {
            table.addInt(index, I.INFLIGHT, -1);
            if (end.outcome === "stream_error" || end.outcome === "timeout") {
              metrics.attemptFailures.inc({ endpoint: endpoint.id, reason: end.failure });
              if (ENDPOINT_FAULTS.has(end.failure)) breakers.failure(index);
            }
            finish({
              outcome: end.outcome,
              status: 200,
              endpoint: endpoint.id,
              attempts,
              usage,
              error: end.outcome === "ok" || end.outcome === "cancelled" ? undefined : end.message,
            });
          },
        });
        return new Response(body, {
          status: 200,
          headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", ...headers },
        });
      }

      table.addInt(index, I.INFLIGHT, -1);
      if (result.failure === "cancelled") {
        if (grant.probe) breakers.abandon(index);
        return fail(new LlmgwError("INTERNAL_ERROR", "client went away"), "cancelled");
      }
      metrics.attemptFailures.inc({ endpoint: endpoint.id, reason: result.failure });
      last = result;
      if (result.failure === "status_4xx") {
        breakers.success(index); // the engine is healthy; the request was not
        const { message } = engineError(result.body);
        if (CONTEXT_LENGTH_RE.test(message) && m < chain.length - 1) continue chain;
        // 404: this endpoint does not (or no longer) serve the model — its
        // model list changed since the last poll. Another endpoint may.
        if (result.status === 404) {
          exclude.push(index);
          continue;
        }
        finish({ outcome: "client_error", status: result.status ?? 400, endpoint: endpoint.id, attempts, usage: undefined, error: message });
        return rejectedResponse(result, { ...baseHeaders, "x-llmgw-endpoint": endpoint.id, "x-llmgw-attempts": String(attempts) });
      }
      if (result.failure === "status_429") {
        breakers.coolDown(index, Math.min(result.retryAfterMs ?? config.retry.maxRetryAfterMs, config.retry.maxRetryAfterMs));
      } else if (ENDPOINT_FAULTS.has(result.failure)) {
        breakers.failure(index);
      } else if (grant.probe) {
        breakers.abandon(index); // no verdict on the endpoint: let another request probe
      }
      exclude.push(index);
      // The whole request is out of time, or its answer is too large for any endpoint: no retry can help.
      if (result.failure === "total_timeout" || result.failure === "too_large") break chain;
    }
  }

  if (last === undefined) return fail(new LlmgwError("NO_READY_ENDPOINT", `no ready endpoint serves model '${req.model}'`), "no_endpoint");
  if (last instanceof LlmgwError) {
    return fail(last, last.code === "NO_READY_ENDPOINT" ? "no_endpoint" : "upstream_error");
  }
  const code = FAILURE_CODE[last.failure === "cancelled" ? "connect" : last.failure];
  const retryAfterS = last.retryAfterMs !== undefined ? last.retryAfterMs / 1000 : undefined;
  const detail = last.failure === "status_5xx" || last.failure === "status_429" ? `: ${engineError(last.body).message}` : "";
  const err = new LlmgwError(code, `all ${attempts} attempt(s) failed; last: ${last.message}${detail}`, retryAfterS === undefined ? {} : { retryAfterS });
  return fail(err, last.failure.endsWith("timeout") ? "timeout" : "upstream_error");
}
