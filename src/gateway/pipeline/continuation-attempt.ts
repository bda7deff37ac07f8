/**
 * How a stream's recovery (continuation/stream-recovery.ts) opens a
 * continuation: through the request's Exchange and the same upstream
 * opening and failure judgement as every other attempt. Given to the
 * recovery by the attempt loop, so continuation/ depends on proxy's
 * contracts only.
 */
import type { Config } from "../../config/types.ts";
import type { EndpointRegistry } from "../endpoints.ts";
import type { ModelCatalog } from "../model-catalog.ts";
import { attemptVerdict } from "../proxy/attempt-verdict.ts";
import { engineError, isContextLengthError } from "../proxy/failures.ts";
import type { ContinuationFailed, OpenContinuation } from "../proxy/relay-contracts.ts";
import { openUpstream } from "../proxy/upstream.ts";
import type { Exchange } from "../request/exchange.ts";
import type { UpstreamDial, UpstreamFetch } from "../upstream-reach.ts";

/** Engine answers to a chat (or Responses API) continuation that mean "no prefill here" (vLLM's and OpenAI's validation errors). */
const REFUSAL_STATUSES: ReadonlySet<number | undefined> = new Set([400, 422]);

/** What opening a continuation uses: the engine's URL and deadlines, the retry settings for its verdict, and how to reach it. */
export interface ContinuationOpenerDeps {
  readonly config: Pick<Config, "maxResponseBytes" | "retry">;
  readonly catalog: Pick<ModelCatalog, "deadlinesFor">;
  readonly endpoints: Pick<EndpointRegistry, "urlOf" | "upstreamHeadersOf">;
  readonly dial: UpstreamDial;
  readonly upstreamFetch?: UpstreamFetch;
}

export function continuationOpener(ctx: ContinuationOpenerDeps, x: Exchange): OpenContinuation {
  return async function openContinuation({ grant, model, body, leftMs }) {
    x.hold(grant, model);
    x.sending();
    const url = ctx.endpoints.urlOf(grant.index)!;
    const headers: Record<string, string> = {
      ...ctx.endpoints.upstreamHeadersOf(grant.index),
      "content-type": "application/json",
      accept: "text/event-stream",
      "x-request-id": x.requestId,
    };
    if (x.trace !== undefined) x.trace.attempt(headers, url, x.endpointId, model);
    const result = await openUpstream(
      {
        index: grant.index,
        url,
        body,
        headers,
        stream: true,
        deadlines: ctx.catalog.deadlinesFor(model),
        totalLeftMs: leftMs,
        clientSignal: x.signal,
        dial: ctx.dial,
        fetch: ctx.upstreamFetch,
        maxResponseBytes: ctx.config.maxResponseBytes,
        route: x.route,
      },
      x.path,
    );
    if (result.ok && result.kind === "stream") return result;
    // (A JSON answer cannot come back: openUpstream reads one only for a request that is not a stream.)
    const failed = !result.ok ? result : ({ ok: false, failure: "cancelled", message: "a continuation answered with JSON" } as const);
    x.endAttempt(attemptVerdict(failed, ctx.config.retry.maxRetryAfterMs));
    const out: ContinuationFailed = { ok: false, failure: failed.failure };
    // Raw completions are plain prompts: a rejection there says nothing about the endpoint.
    if (failed.failure === "status_4xx" && (x.route === "chat" || x.route === "responses") && REFUSAL_STATUSES.has(failed.status)) {
      const { message } = engineError(failed.body);
      if (!isContextLengthError(message)) out.refusedPrefill = { status: failed.status!, message };
    }
    return out;
  };
}
