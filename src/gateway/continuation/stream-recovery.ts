/**
 * One stream's way past a broken engine. While the answer goes
 * to the client it tracks what was delivered (a StreamTracker on the
 * original stream, a ContinuationRewriter on each continuation). When the
 * stream breaks after its first byte — cut, stalled, an engine error, its
 * replica drained — resume() opens a continuation through the request's own
 * Exchange (hold / sending / endAttempt): on another ready replica of the
 * model that was serving, then down its fallback chain in order; never on an
 * (endpoint, model) that broke or failed in this request — the same URL may
 * well serve the fallback (a hosted provider, an engine with several models
 * or LoRA adapters), as circuits are kept per (endpoint, model) — nor on an
 * endpoint the config keeps out, or that refused a prefill before (a 400 teaches that, and is never what
 * the client sees). Bounded by continuation.max_recoveries, the total
 * deadline, retry.max_attempts per break and the retry budget (one retry per
 * continuation attempt). The relay calls it; it never calls back up, and it
 * opens upstreams only through the OpenContinuation the attempt loop gives it.
 */

import type { Config } from "../../config/types.ts";
import type { BreakCause, RecoveryResult } from "../../metrics/names.ts";
import type { GatewayMetrics } from "../../metrics/registry.ts";
import type { Logger } from "../../shared/logger.ts";
import type { AdmissionClient, Grant } from "../admission-client.ts";
import type { CircuitBreakers } from "../circuit-breaker.ts";
import type { ContinuationPolicy } from "../continuation-policy.ts";
import type { EndpointRegistry } from "../endpoints.ts";
import type { ModelCatalog } from "../model-catalog.ts";
import { abandon, type ContinuationFailed, type OpenContinuation, type OpenStream, type RelayRecovery } from "../proxy/relay-contracts.ts";
import type { Exchange, RecoveryNote, Usage } from "../request/exchange.ts";
import type { ParsedRequest } from "../request/parse.ts";
import type { RetryBudget } from "../retry-budget.ts";
import type { Evictable } from "../stream-evictions.ts";
import { type ContinuationKit, type ContinuationSegment, type ContinuationTracker, continuationKit } from "./continuation-kit.ts";

/** Why a break was not continued (the metric's result, and a detail for the audit line). */
interface Refusal {
  ok: false;
  result: Exclude<RecoveryResult, "recovered">;
  reason?: string;
}

function refusal(result: Refusal["result"], reason?: string): Refusal {
  return reason === undefined ? { ok: false, result } : { ok: false, result, reason };
}

/** What a stream's recovery uses: where a continuation may go (the policy, the endpoints, admission and the circuits), its budget, and what it reports. */
export interface StreamRecoveryDeps {
  readonly config: { readonly retry: Pick<Config["retry"], "maxAttempts"> };
  readonly admission: Pick<AdmissionClient, "release" | "reschedule">;
  readonly breakers: Pick<CircuitBreakers, "abandon">;
  readonly budget: Pick<RetryBudget, "tryWithdraw">;
  readonly catalog: Pick<ModelCatalog, "deadlinesFor">;
  readonly continuation: Pick<ContinuationPolicy, "learnRefusal" | "maxRecoveries" | "modelOn" | "target">;
  readonly endpoints: Pick<EndpointRegistry, "active" | "evictions" | "idOf" | "urlOf">;
  readonly log: Pick<Logger, "warn">;
  readonly metrics: Pick<GatewayMetrics, "streamRecoveries" | "streamRecoverySeconds">;
}

/** A continuation that opened: its stream, where, and what it continues from. */
interface Opened {
  ok: true;
  stream: OpenStream;
  slot: number;
  at: number;
  before: { text: string; tokens: number };
}

export class StreamRecovery implements RelayRecovery {
  readonly tracking: boolean;
  rewriting = false;
  private readonly tracker: ContinuationTracker | undefined;
  private rewriter: ContinuationSegment | undefined;
  private stream: Evictable | undefined;
  private recoveries = 0;
  /** Per model, the slots whose stream of it broke, or whose continuation attempt of it failed, in this request: never tried again for it. */
  private readonly spent = new Map<string, Set<number>>();
  /** Index into the chain of the model now serving. */
  private at = 0;
  private closed = false;
  /** When the stream broke, until its continuation's first token went out (NaN: nothing waiting). */
  private brokeAt = Number.NaN;

  private constructor(
    private readonly ctx: StreamRecoveryDeps,
    private readonly x: Exchange,
    private readonly request: ParsedRequest,
    private readonly openAttempt: OpenContinuation,
    /** The model serving the stream, then the rest of its fallback chain, in order. */
    private readonly chain: readonly string[],
    /** The endpoint slot serving the stream. */
    private slot: number,
    /** Why the request cannot be continued exactly (undefined: it can). */
    private readonly notContinuable: string | undefined,
    /** How this API's streams are continued (chat and completions, or the Responses API). */
    private readonly kit: ContinuationKit,
  ) {
    this.tracking = notContinuable === undefined;
    this.tracker = this.tracking ? kit.tracker() : undefined;
  }

  /** The recovery of a stream just opened on `slot` for chain[0]; undefined when continuation is off for that model. */
  static for(
    ctx: StreamRecoveryDeps,
    x: Exchange,
    request: ParsedRequest,
    open: OpenContinuation,
    chain: readonly string[],
    slot: number,
  ): StreamRecovery | undefined {
    if (!ctx.continuation.modelOn(chain[0]!)) return undefined;
    const kit = continuationKit(x.route);
    const c = kit.continuable(request.body);
    return new StreamRecovery(ctx, x, request, open, chain, slot, c.ok ? undefined : c.reason, kit);
  }

  get usage(): Usage | undefined {
    return this.rewriter?.usage;
  }

  bind(stream: Evictable): void {
    this.stream = stream;
    this.ctx.endpoints.evictions.enter(this.slot, stream);
  }

  observe(event: Uint8Array): void {
    this.tracker!.observeData(event);
  }

  rewrite(kind: "data" | "usage" | "meta" | "final", event: Uint8Array): Uint8Array | undefined {
    const out = this.rewriter!.rewrite({ kind, bytes: event });
    if (out !== undefined && kind === "data" && !Number.isNaN(this.brokeAt)) {
      this.ctx.metrics.streamRecoverySeconds.observe({ model: this.request.model }, (performance.now() - this.brokeAt) / 1000);
      this.brokeAt = Number.NaN;
    }
    return out;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.leave();
  }

  async resume(cause: BreakCause): Promise<OpenStream | undefined> {
    const { ctx, x } = this;
    const brokeAt = performance.now();
    const from = x.endpointId;
    x.trace?.continuing(cause);
    this.leave();
    this.spend(this.slot, this.chain[this.at]!);
    const got = await this.continuation();
    const note: RecoveryNote = { cause, from, result: got.ok ? "recovered" : got.result };
    if (!got.ok && got.reason !== undefined) note.reason = got.reason;
    (x.recoveries ??= []).push(note);
    ctx.metrics.streamRecoveries.inc({ model: this.request.model, cause, result: note.result });
    x.trace?.continued(note.result, note.reason);
    if (!got.ok) return undefined;
    note.to = x.endpointId;
    if (got.at > 0) note.model = this.chain[got.at];
    this.recoveries++;
    this.slot = got.slot;
    this.at = got.at;
    this.rewriter = (this.rewriter ?? this.tracker!).segment(got.before);
    this.rewriting = true;
    this.brokeAt = brokeAt;
    if (this.stream) ctx.endpoints.evictions.enter(this.slot, this.stream);
    return got.stream;
  }

  private leave(): void {
    if (this.stream) this.ctx.endpoints.evictions.leave(this.slot, this.stream);
  }

  /** A continuation opened on the first target that takes it, or why there is none. */
  private async continuation(): Promise<Opened | Refusal> {
    const { ctx, x } = this;
    if (this.closed || x.signal.aborted) return refusal("cancelled");
    if (this.notContinuable !== undefined) return refusal("not_continuable", this.notContinuable);
    const point = (this.rewriter ?? this.tracker!).resumePoint();
    if (!point.ok) return refusal("not_resumable", point.reason);
    if (this.recoveries >= ctx.continuation.maxRecoveries) return refusal("limit");
    const before = { text: point.text, tokens: point.tokens };
    let tries = 0;
    for (let at = this.at; at < this.chain.length; at++) {
      const model = this.chain[at]!;
      if (!ctx.continuation.modelOn(model)) continue;
      const body = this.kit.body(this.request.body, point.text, point.tokens, model);
      if (body === undefined) return refusal("not_resumable", "token_limit_spent");
      const totalMs = ctx.catalog.deadlinesFor(model).totalMs;
      const exclude = this.excluded(model);
      for (;;) {
        if (tries >= ctx.config.retry.maxAttempts) return refusal("no_target");
        const leftMs = x.totalLeftMs(totalMs);
        if (leftMs <= 0) return refusal("deadline");
        const grant = this.grant(model, exclude, at === this.chain.length - 1);
        if (grant === undefined) break; // nothing (else) ready for this model: the next one in the chain
        if (!ctx.budget.tryWithdraw()) {
          this.release(grant);
          return refusal("retry_budget");
        }
        tries++;
        const stream = await this.open(grant, model, body, leftMs);
        if (!("failure" in stream)) return { ok: true, stream, slot: grant.index, at, before };
        if (stream.failure === "cancelled") return refusal("cancelled");
        if (stream.failure === "total_timeout") return refusal("deadline");
        exclude.add(grant.index);
        this.spend(grant.index, model);
      }
    }
    return refusal("no_target");
  }

  private spend(slot: number, model: string): void {
    let slots = this.spent.get(model);
    if (slots === undefined) this.spent.set(model, (slots = new Set()));
    slots.add(slot);
  }

  /** Slots that may not take this continuation of `model`: spent for it in this request, kept out by the config, or known to refuse a prefill. */
  private excluded(model: string): Set<number> {
    const exclude = new Set(this.spent.get(model));
    for (const e of this.ctx.endpoints.active()) if (!this.ctx.continuation.target(e.id, model)) exclude.add(e.index);
    return exclude;
  }

  /** Another ready endpoint of `model` by scoring alone (the request was admitted once); undefined: none. `lastResort`: the chain's last model. */
  private grant(model: string, exclude: ReadonlySet<number>, lastResort: boolean): Grant | undefined {
    try {
      return this.ctx.admission.reschedule(model, this.x.band, this.x.routingKeys(), exclude, lastResort);
    } catch {
      return undefined;
    }
  }

  /** Give back a grant that will not be used (what Exchange.endAttempt does for a neutral verdict). */
  private release(grant: Grant): void {
    this.ctx.admission.release(grant, this.x.band);
    if (grant.probe >= 0) this.ctx.breakers.abandon(grant.index, grant.probe);
  }

  /** Send the continuation to the granted endpoint through the attempt loop's opener; the open stream, or the failure (its verdict given). */
  private async open(grant: Grant, model: string, body: string, leftMs: number): Promise<OpenStream | ContinuationFailed> {
    const { x } = this;
    if (this.closed || x.signal.aborted) {
      this.release(grant);
      return { ok: false, failure: "cancelled" };
    }
    const result = await this.openAttempt({ grant, model, body, leftMs });
    if (!result.ok) {
      if (result.refusedPrefill !== undefined) this.refused(grant, model, result.refusedPrefill);
      return result;
    }
    if (!this.closed) {
      x.answered();
      return result;
    }
    abandon(result); // the client left while it opened
    x.endAttempt({ kind: "neutral" });
    return { ok: false, failure: "cancelled" };
  }

  /**
   * An engine rejected a chat continuation (not for its length): it cannot
   * take a prefill (continue_final_message is unknown to it), so it is never
   * a target for this model again.
   */
  private refused(grant: Grant, model: string, refusal: { status: number; message: string }): void {
    const { ctx } = this;
    const id = ctx.endpoints.idOf(grant.index);
    if (id !== undefined && ctx.continuation.learnRefusal(id, model, ctx.endpoints.urlOf(grant.index))) {
      ctx.log.warn(
        { endpoint: id, model, status: refusal.status, error: refusal.message },
        "endpoint refused a continuation: no longer a continuation target for this model",
      );
    }
  }
}
