/**
 * One request's life, owned by one object: who asked (tenant, band), what
 * (model, stream), the endpoint it holds (the claim, at most one at a time),
 * every attempt's verdict for the circuit breaker, its timings and tokens,
 * and a single finish() that runs exactly once whatever happened — releasing
 * the claim, settling the quota, recording the metrics and writing the audit
 * line. The request path (pipeline → gates → attempts → relay) hands this
 * object down; nothing climbs back up through callbacks to end a request.
 */
import type { AttemptFailure, BreakCause, Outcome, RecoveryResult, Route } from "../../metrics/names.ts";
import { I } from "../../shared/endpoint-table.ts";
import { UNKNOWN_MODEL } from "../../metrics/names.ts";
import type { RequestSeries } from "../../metrics/registry.ts";
import { errorResponse, type LlmgwError } from "../../shared/errors.ts";
import type { Grant } from "../admission-client.ts";
import type { GatewayContext } from "../context.ts";
import type { Principal } from "../gates/auth.ts";
import type { InferenceBody } from "./parse.ts";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
}

/** One break of a stream after its first byte and how it was handled (issue 13), for the audit line. */
export interface RecoveryNote {
  cause: BreakCause;
  /** The endpoint whose stream broke. */
  from: string | undefined;
  result: RecoveryResult;
  /** Where the continuation runs (recovered), and its model when a fallback took it. */
  to?: string;
  model?: string;
  /** Why it was not continued, in detail (not_continuable, not_resumable: tools, finished …). */
  reason?: string;
}

/** What an attempt said about the endpoint it went to (the circuit breaker's input). */
export type AttemptVerdict =
  /** The engine answered (also with a 4xx, `failure` "status_4xx": the engine is healthy, the request was not). */
  | { kind: "healthy"; failure?: AttemptFailure }
  /** A failure that counts against the endpoint. */
  | { kind: "fault"; failure: AttemptFailure }
  /** The engine asked us to back off for `ms`. */
  | { kind: "cool_down"; failure: AttemptFailure; ms: number }
  /** No verdict on the endpoint (the client left, the answer was too large, the gateway's own loop had stalled…). */
  | { kind: "neutral"; failure?: AttemptFailure; excused?: boolean };

export class Exchange {
  readonly arrivedAt = performance.now();
  readonly requestId: string;
  /** Canonical model (alias resolved) once known. */
  model: string | undefined;
  body: InferenceBody | undefined;
  /** The client's bytes, forwarded unchanged when nothing must change. */
  rawBody: Uint8Array = EMPTY;
  stream = false;
  /** The client asked for stream_options.include_usage. */
  includeUsage = false;
  /** Choices the answer has (the request's n). */
  choices = 1;
  prefixHashes: number[] = NO_HASHES;
  principal: Principal | undefined;
  estTokens = 0;
  /** x-ratelimit-* headers from the quota gate. */
  quotaHeaders: Record<string, string> = NO_HEADERS;
  /** Requests sent to engines so far. */
  attempts = 0;
  /** The endpoint of the current (or last) attempt. */
  endpointId: string | undefined;
  usage: Usage | undefined;
  /** Breaks of the stream after its first byte and how each was handled (issue 13); undefined when none. */
  recoveries: RecoveryNote[] | undefined;
  private series: RequestSeries | undefined;
  private grant: Grant | undefined;
  private lastTokenAt = 0;
  private finished = false;

  constructor(
    private readonly ctx: GatewayContext,
    readonly route: Route,
    readonly path: string,
    requestId: string,
    /** The client's signal: aborted when it goes away. */
    readonly signal: AbortSignal,
  ) {
    this.requestId = requestId;
  }

  get tenant(): string {
    return this.principal?.tenant ?? "anonymous";
  }

  get band(): number {
    return this.principal?.band ?? this.ctx.config.admission.defaultBand;
  }

  get bandName(): string {
    return this.ctx.config.admission.bands[this.band]?.name ?? "unknown";
  }

  /** The request's model is known (before that, metrics label it "unknown"). */
  setModel(model: string): void {
    this.model = model;
    this.series = this.ctx.metrics.requestSeries(model, this.route);
  }

  /** Milliseconds left of the total deadline of `model`. */
  totalLeftMs(totalMs: number): number {
    return totalMs - (performance.now() - this.arrivedAt);
  }

  /** Take ownership of a claimed endpoint for the next attempt. */
  hold(grant: Grant): void {
    if (this.grant) throw new Error("an exchange holds one endpoint at a time");
    this.grant = grant;
    this.endpointId = this.ctx.endpoints.idOf(grant.index);
    for (const scorer in grant.scores) this.ctx.metrics.scoreSeries(scorer).observe(grant.scores[scorer]!);
  }

  /** The held endpoint is about to be sent the request: one more attempt; the router's own overhead ends at the first. */
  sending(): void {
    this.attempts++;
    if (this.attempts === 1) this.ctx.metrics.overhead.observe((performance.now() - this.arrivedAt) / 1000);
  }

  /** The engine answered the current attempt: a success for its circuits (a stream may still break later). */
  answered(): void {
    const g = this.grant;
    if (!g) return;
    this.ctx.breakers.success(g.index, I.CIRCUIT);
    if (g.circuit >= 0) this.ctx.breakers.success(g.index, g.circuit);
  }

  /** The current attempt is over: let go of the endpoint and tell its circuit breaker what it showed. */
  endAttempt(verdict: AttemptVerdict): void {
    const g = this.grant;
    if (!g) return;
    this.grant = undefined;
    const { breakers, metrics } = this.ctx;
    this.ctx.admission.release(g.index, g.pool, this.band);
    if (verdict.kind === "neutral" && verdict.excused && verdict.failure !== undefined) metrics.deadlinesExcused.inc({ deadline: verdict.failure });
    if (verdict.failure !== undefined && this.endpointId !== undefined) {
      metrics.attemptFailures.inc({ endpoint: this.endpointId, reason: verdict.failure });
    }
    // A connect failure is the endpoint's; anything an engine did once it
    // answered (a 429, a 5xx, a timeout, a broken stream) is the model's.
    const field = verdict.failure === "connect" || g.circuit < 0 ? I.CIRCUIT : g.circuit;
    switch (verdict.kind) {
      case "healthy":
        breakers.success(g.index, I.CIRCUIT);
        if (g.circuit >= 0) breakers.success(g.index, g.circuit);
        return;
      case "fault":
        if (g.probe >= 0 && g.probe !== field) breakers.abandon(g.index, g.probe);
        return breakers.failure(g.index, field);
      case "cool_down":
        if (g.probe >= 0 && g.probe !== field) breakers.abandon(g.index, g.probe);
        return breakers.coolDown(g.index, field, verdict.ms);
      case "neutral":
        if (g.probe >= 0) breakers.abandon(g.index, g.probe); // let another request probe
        return;
    }
  }

  /** The first token went to the client. */
  firstToken(now: number): void {
    this.lastTokenAt = now;
    this.series?.ttft.observe((now - this.arrivedAt) / 1000);
  }

  /** More tokens went to the client (observed once per upstream chunk). */
  tokens(now: number): void {
    this.series?.interToken.observe((now - this.lastTokenAt) / 1000);
    this.lastTokenAt = now;
  }

  /** The engine sent an invalid SSE event (dropped). */
  malformed(): void {
    if (this.endpointId !== undefined) this.ctx.metrics.malformedEvents.inc({ endpoint: this.endpointId });
  }

  /** Response headers every answer carries; `answered`: an engine's answer, naming the endpoint that gave it. */
  headers(answered = false): Record<string, string> {
    const h: Record<string, string> = { ...this.quotaHeaders, "x-request-id": this.requestId };
    if (this.attempts > 0) h["x-llmgw-attempts"] = String(this.attempts);
    if (answered && this.endpointId !== undefined) h["x-llmgw-endpoint"] = this.endpointId;
    return h;
  }

  /** End the request with an error answer. */
  fail(err: LlmgwError, outcome: Outcome): Response {
    this.finish(outcome, err.status, err.message);
    return errorResponse(err, this.headers());
  }

  /** Runs once: releases what is still held, settles the quota, records metrics and the audit line. */
  finish(outcome: Outcome, status: number, error?: string): void {
    if (this.finished) return;
    this.finished = true;
    this.endAttempt({ kind: "neutral" });
    const { ctx } = this;
    const now = Date.now();
    const tenant = this.tenant;
    // Correct the token estimate with the engine's usage; a request that never
    // reached an engine gets its tokens back.
    if (this.estTokens > 0) {
      if (this.usage) ctx.quota.settle(tenant, this.estTokens, this.usage.prompt_tokens + this.usage.completion_tokens, now);
      else if (this.attempts === 0) ctx.quota.refund(tenant, this.estTokens, now);
    }
    const seconds = (performance.now() - this.arrivedAt) / 1000;
    const series = this.series ?? ctx.metrics.requestSeries(UNKNOWN_MODEL, this.route);
    series.finished(outcome, this.stream, seconds, this.usage);
    ctx.log.info(
      {
        request_id: this.requestId,
        route: this.route,
        model: this.model ?? UNKNOWN_MODEL,
        stream: this.stream,
        tenant,
        band: this.bandName,
        outcome,
        status,
        endpoint: this.endpointId,
        attempts: this.attempts,
        prompt_tokens: this.usage?.prompt_tokens,
        completion_tokens: this.usage?.completion_tokens,
        recoveries: this.recoveries,
        duration_ms: Math.round(seconds * 1000),
        error,
      },
      "request",
    );
  }
}

const EMPTY = new Uint8Array(0);
const NO_HASHES: number[] = [];
const NO_HEADERS: Record<string, string> = {};
