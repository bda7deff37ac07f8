/**
 * One request's life, owned by one object: who asked (tenant, band), what
 * (model, stream), the endpoint it holds (the claim, at most one at a time),
 * every attempt's verdict for the circuit breaker, its timings and tokens,
 * and a single finish() that runs exactly once whatever happened — releasing
 * the claim, settling the quota, recording the metrics and writing the audit
 * line. The request path (pipeline → gates → attempts → relay) hands this
 * object down; nothing climbs back up through callbacks to end a request.
 */

import type { RoutingKeys } from "../../admission/chooser.ts";
import type { TenantQuota } from "../../admission/tenant-quota.ts";
import type { Config } from "../../config/types.ts";
import type { DemandSignals, ModelDemand } from "../../control/autoscale/demand.ts";
import type { AttemptFailure, BreakCause, Outcome, RecoveryResult, Route } from "../../metrics/names.ts";
import { UNKNOWN_MODEL } from "../../metrics/names.ts";
import type { GatewayMetrics, RequestSeries } from "../../metrics/registry.ts";
import { type AuditRecovery, requestAuditRecord } from "../../shared/audit.ts";
import { I } from "../../shared/endpoint-table.ts";
import { type ErrorCode, errorResponse, type LlmgwError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/logger.ts";
import { infoRecord } from "../../shared/logger.ts";
import { headerSafeName } from "../../shared/model-name.ts";
import type { RequestTrace } from "../../tracing/tracer-contract.ts";
import type { AdmissionClient, Grant } from "../admission-client.ts";
import type { Principal } from "../api-keys.ts";
import type { CircuitBreakers } from "../circuit-breaker.ts";
import { probeTargetOf } from "../circuit-breaker.ts";
import type { EndpointRegistry } from "../endpoints.ts";
import type { ParsedRequest } from "./parse.ts";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
}

/** One break of a stream after its first byte and how it was handled, for the audit line. */
export interface RecoveryNote extends AuditRecovery {
  cause: BreakCause;
  result: RecoveryResult;
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

/** What an exchange reports to and gives back to: the bands, the request metrics, the claimed endpoint's circuits and admission slot, the quota to settle, the audit log. */
export interface ExchangeDeps {
  readonly config: { readonly admission: Pick<Config["admission"], "defaultBand" | "bands"> };
  readonly metrics: Pick<
    GatewayMetrics,
    "requestSeries" | "scoreSeries" | "overheadSeries" | "deadlinesExcused" | "attemptFailures" | "malformedEvents" | "toolCalls"
  >;
  readonly endpoints: Pick<EndpointRegistry, "idOf">;
  readonly breakers: Pick<CircuitBreakers, "success" | "attemptEnded">;
  readonly admission: Pick<AdmissionClient, "release" | "prefillDone">;
  readonly quota: Pick<TenantQuota, "settle">;
  readonly log: Pick<Logger, "info" | "isLevelEnabled">;
  /** What the autoscaler reads of autoscaled models' requests (absent: no fleet). */
  readonly demand?: Pick<DemandSignals, "of">;
}

export class Exchange {
  readonly arrivedAt = performance.now();
  readonly requestId: string;
  /** What the parse step yielded; undefined until then (and for a request refused before it). */
  private request: ParsedRequest | undefined;
  /** The request body's share of the uploads' memory budget (a transcription's form), given back by finish(). */
  heldBody: { release(): void } | undefined;
  /** Tool calls the answer started (llmgw_tool_calls_total). */
  toolCalls = 0;
  prefixHashes: number[] = NO_HASHES;
  /** Token-block keys of the prompt's token ids (precise-prefix); undefined when it was not tokenized. */
  tokenBlockKeys: readonly number[] | undefined;
  principal: Principal | undefined;
  estTokens = 0;
  /** The prompt's share of the estimate (what a request that generated tokens but reported no usage is charged for its prompt). */
  promptEstimate = 0;
  /** Data events relayed to the client (completion tokens, near enough, when the engine reports no usage). */
  delivered = 0;
  /** x-ratelimit-* headers from the quota gate. */
  quotaHeaders: Record<string, string> = NO_HEADERS;
  /** Requests sent to engines so far. */
  attempts = 0;
  /** The endpoint of the current (or last) attempt. */
  endpointId: string | undefined;
  /** `endpointId` as x-llmgw-endpoint carries it (ids are configured or registered, but a header must never be what fails an answer). */
  private endpointInHeader: string | undefined;
  usage: Usage | undefined;
  /** Models whose engines wrote (part of) the answer, in order: a fallback's, a continuation's on another model. */
  readonly wrote: string[] = [];
  /** `wrote` as x-llmgw-model carries it, each name encoded when its attempt was claimed, before any engine generated. */
  private readonly wroteInHeader: string[] = [];
  /** Breaks of the stream after its first byte and how each was handled; undefined when none. */
  recoveries: RecoveryNote[] | undefined;
  /** Audit: answered from the response cache ("hit") or recorded into it ("miss"); undefined when not cacheable. */
  cache: "hit" | "miss" | undefined;
  /** Audit: answered by replaying an idempotency record. */
  replay = false;
  /** Audit: the batch this request runs a line of. */
  batchId: string | undefined;
  /** The request's spans; undefined when tracing is off (each stage then checks this and nothing else). */
  trace: RequestTrace | undefined;
  /** What scoring reads of the prompt. */
  routingKeys(): RoutingKeys {
    return this.tokenBlockKeys === undefined
      ? { prefixHashes: this.prefixHashes, promptTokens: this.promptEstimate }
      : { prefixHashes: this.prefixHashes, tokenBlockKeys: this.tokenBlockKeys, promptTokens: this.promptEstimate };
  }

  private queueMs: number | undefined;
  private ttftMs: number | undefined;
  private errorCode: ErrorCode | undefined;
  private series: RequestSeries | undefined;
  private grant: Grant | undefined;
  /** The model the current attempt asks for (the request's, or a fallback's). */
  private attemptModel: string | undefined;
  /** `attemptModel` in its header form. */
  private attemptModelInHeader = "";
  private lastTokenAt = 0;
  private finished = false;
  /** The autoscaled model's demand this request counts toward; undefined when its model is not autoscaled. */
  private demand: ModelDemand | undefined;

  constructor(
    private readonly ctx: ExchangeDeps,
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

  /** The request was parsed and its model is known (before that, metrics label it "unknown"). */
  parsed(request: ParsedRequest): void {
    this.request = request;
    this.series = this.ctx.metrics.requestSeries(request.model, this.route);
    this.demand = this.ctx.demand?.of(request.model);
    this.demand?.arrived();
    this.trace?.parsed(request.model, request.stream);
  }

  /** Canonical model (alias resolved) once parsed. */
  get model(): string | undefined {
    return this.request?.model;
  }

  get stream(): boolean {
    return this.request?.stream ?? false;
  }

  get includeUsage(): boolean {
    return this.request?.includeUsage ?? false;
  }

  get choices(): number {
    return this.request?.choices ?? 1;
  }

  get offersTools(): boolean {
    return this.request?.offersTools ?? false;
  }

  /** Milliseconds left of the total deadline of `model`. */
  totalLeftMs(totalMs: number): number {
    return totalMs - (performance.now() - this.arrivedAt);
  }

  /** Take ownership of a claimed endpoint for the next attempt, which asks it for `model`. */
  hold(grant: Grant, model: string): void {
    if (this.grant) throw new Error("an exchange holds one endpoint at a time");
    this.grant = grant;
    this.attemptModel = model;
    this.attemptModelInHeader = headerSafeName(model);
    this.queueMs ??= grant.waitedMs; // admission's wait: only the first grant is queued
    this.endpointId = this.ctx.endpoints.idOf(grant.index);
    this.endpointInHeader = this.endpointId === undefined ? undefined : headerSafeName(this.endpointId);
    for (const scorer in grant.scores) this.ctx.metrics.scoreSeries(scorer).observe(grant.scores[scorer]!);
    this.trace?.scheduled(grant, this.endpointId, model);
  }

  /** The held endpoint is about to be sent the request: one more attempt; the router's own overhead ends at the first. */
  sending(): void {
    this.attempts++;
    if (this.attempts === 1) this.ctx.metrics.overheadSeries.observe((performance.now() - this.arrivedAt) / 1000);
  }

  /** The engine answered the current attempt: a success for its circuits (a stream may still break later). */
  answered(): void {
    const g = this.grant;
    if (!g) return;
    const model = this.attemptModel;
    if (model !== undefined && this.wrote[this.wrote.length - 1] !== model) {
      this.wrote.push(model);
      this.wroteInHeader.push(this.attemptModelInHeader);
    }
    this.ctx.breakers.success(g.index, I.CIRCUIT);
    if (g.circuit >= 0) this.ctx.breakers.success(g.index, g.circuit);
    if (model !== undefined) this.trace?.answered(model);
  }

  /** The current attempt is over: let go of the endpoint and tell its circuit breaker what it showed. */
  endAttempt(verdict: AttemptVerdict): void {
    const g = this.grant;
    if (!g) return;
    this.grant = undefined;
    this.trace?.attemptEnded(verdict);
    const { breakers, metrics } = this.ctx;
    this.ctx.admission.release(g, this.band);
    if (verdict.kind === "neutral" && verdict.excused && verdict.failure !== undefined) metrics.deadlinesExcused.inc({ deadline: verdict.failure });
    if (verdict.failure !== undefined && this.endpointId !== undefined) {
      metrics.attemptFailures.inc({ endpoint: this.endpointId, reason: verdict.failure });
    }
    breakers.attemptEnded(g, verdict, verdict.kind === "fault" ? probeTargetOf(this.route, this.attemptModel) : undefined);
  }

  /** The first token went to the client. */
  firstToken(now: number): void {
    this.lastTokenAt = now;
    this.ttftMs = now - this.arrivedAt;
    if (this.grant !== undefined && this.grant.prefillTokens > 0) this.ctx.admission.prefillDone(this.grant);
    this.series?.ttft.observe(this.ttftMs / 1000);
    this.demand?.firstToken(this.ttftMs);
    this.trace?.firstToken(this.ttftMs);
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
    if (answered && this.endpointInHeader !== undefined) h["x-llmgw-endpoint"] = this.endpointInHeader;
    // The models that wrote the answer so far (at the first byte: the one that answered; a continuation's is in the audit line).
    if (answered && this.wroteInHeader.length > 0) h["x-llmgw-model"] = this.wroteInHeader.join(",");
    return h;
  }

  /** End the request with an error answer. */
  fail(err: LlmgwError, outcome: Outcome): Response {
    this.finish(outcome, err.status, err.message, err.code);
    return errorResponse(err, this.headers());
  }

  /** The prompt was estimated: its tokens count toward the model's demand. */
  estimated(): void {
    this.demand?.prompt(this.promptEstimate);
  }

  /** For a stream of more than one token, its mean inter-token time (TPOT) goes to the model's demand. */
  private demandFinished(): void {
    const tokens = this.usage?.completion_tokens ?? this.delivered;
    const tpotMs = this.ttftMs !== undefined && tokens > 1 ? (this.lastTokenAt - this.arrivedAt - this.ttftMs) / (tokens - 1) : undefined;
    this.demand!.finished(tpotMs);
  }

  /** Runs once: releases what is still held, settles the quota, records metrics and the audit line (README, "Audit log schema"). */
  finish(outcome: Outcome, status: number, error?: string, errorCode?: ErrorCode): void {
    if (this.finished) return;
    this.finished = true;
    this.heldBody?.release();
    this.errorCode = errorCode;
    this.endAttempt({ kind: "neutral" });
    const { ctx } = this;
    const now = Date.now();
    const tenant = this.tenant;
    // Settle the estimate charged at the quota gate with what the engine
    // reported; with no report, with what reached the client (nothing: every
    // token back — an engine's 4xx, a failure before the first byte).
    if (this.estTokens > 0) {
      const actual = this.usage ? this.usage.prompt_tokens + this.usage.completion_tokens : this.delivered > 0 ? this.promptEstimate + this.delivered : 0;
      ctx.quota.settle(tenant, this.estTokens, actual, now);
      this.principal?.key?.quota?.settle(this.principal.key.id, this.estTokens, actual, now);
    }
    // A live key's usage: what the engine reported, else the data events that reached the client as its tokens out.
    this.principal?.key?.used(this.usage?.prompt_tokens ?? 0, this.usage?.completion_tokens ?? this.delivered, now);
    const seconds = (performance.now() - this.arrivedAt) / 1000;
    const series = this.series ?? ctx.metrics.requestSeries(UNKNOWN_MODEL, this.route);
    series.finished(outcome, this.stream, seconds, this.usage);
    if (this.demand) this.demandFinished();
    if (this.toolCalls > 0) ctx.metrics.toolCalls.inc({ model: this.model ?? UNKNOWN_MODEL, route: this.route }, this.toolCalls);
    const record = requestAuditRecord({
      requestId: this.requestId,
      tenant,
      model: this.model,
      band: this.bandName,
      route: this.path,
      endpoint: this.endpointId,
      stream: this.stream,
      attempts: this.attempts,
      outcome,
      status,
      errorCode: this.errorCode,
      errorMessage: error,
      promptTokens: this.usage?.prompt_tokens,
      completionTokens: this.usage?.completion_tokens,
      startedAtMs: now - Math.round(seconds * 1000),
      endedAtMs: now,
      queueMs: this.queueMs === undefined ? undefined : Math.round(this.queueMs),
      ttftMs: this.ttftMs === undefined ? undefined : Math.round(this.ttftMs),
      cache: this.cache,
      replay: this.replay,
      batchId: this.batchId,
      recoveries: this.recoveries,
      models: this.wrote,
    });
    infoRecord(ctx.log, record, "audit");
    this.trace?.finish(outcome, status, this.usage, errorCode);
  }
}

const NO_HASHES: number[] = [];
const NO_HEADERS: Record<string, string> = {};
