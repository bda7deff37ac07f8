/**
 * One streamed completion through the twin's gateway, by the rules of the
 * gateway's attempt loop (src/gateway/pipeline/attempts.ts) and stream
 * recovery (src/gateway/continuation/stream-recovery.ts), with the gateway's
 * own circuits, retry budget, verdicts and scheduler:
 *
 * - admitted once (the fast path or the queue); each further attempt is
 *   scored alone, excluding the endpoints that failed it;
 * - before the first token reaches the client, a failed attempt (a refused
 *   port, no first token within `first_token_ms`, the stream cut) is retried
 *   up to `retry.max_attempts`, each retry taken from the retry budget after
 *   a jittered backoff, the failed endpoint again only as its failure class
 *   allows once no other is left;
 * - after it, a break (the engine died: cut; silent past `idle_ms`: stall;
 *   its replica taken away past the drain's grace period: drained) is
 *   continued on another endpoint — the prompt and the tokens delivered so
 *   far, for the tokens still owed — up to `continuation.max_recoveries`
 *   times, each try taken from the retry budget, never on an endpoint the
 *   request broke on;
 * - each attempt's verdict goes to the gateway's circuit breakers, as the
 *   Exchange gives it.
 *
 * What the twin's requests do not have: fallback models (one model is
 * served), Retry-After (twin engines answer no 429), and the 4xx paths.
 */

import { probeTargetOf } from "../gateway/circuit-breaker.ts";
import { FAILURE_CODE } from "../gateway/proxy/failures.ts";
import type { Evictable } from "../gateway/stream-evictions.ts";
import type { AttemptFailure, BreakCause } from "../metrics/names.ts";
import { I } from "../shared/endpoint-table.ts";
import { describeCode } from "../shared/errors.ts";
import type { Sequence } from "../sim/sequence.ts";
import type { PromptTokens } from "../sim/tokens.ts";
import type { EventQueue } from "./event-queue.ts";
import type { TwinEngine } from "./twin-engine.ts";
import type { TwinGateway, TwinGrant, TwinRequestKeys } from "./twin-gateway.ts";

/** How one request ended, as its client saw it. */
interface TwinAnswer {
  /** 200 once a stream opened (a break no continuation mended included), else the gateway's error status. */
  status: number;
  /** The gateway's error code and message (a stream's break, or the refusal). */
  error?: string;
  /** The engine that sent the last token (or that the last attempt went to). */
  endpoint?: string;
  /** Time of the first and the last token delivered, simulated ms (NaN without one). */
  firstAt: number;
  lastAt: number;
  tokens: number;
  /** The prompt's tokens, as the first engine tokenized it. */
  promptTokens: number;
  /** Attempts before the first token that failed and were tried again. */
  retries: number;
  /** Breaks after the first token that a continuation mended. */
  recoveries: number;
}

interface TwinRequestOptions {
  keys: TwinRequestKeys;
  /** The prompt's text, tokenized by the engine it goes to. */
  prompt: string;
  maxTokens: number;
  /** Each token as it reaches the client. */
  onToken(at: number): void;
  done(answer: TwinAnswer): void;
}

/** Sends requests through the twin's gateway to its engines. */
export class TwinRequests {
  constructor(
    readonly gateway: TwinGateway,
    readonly engines: readonly TwinEngine[],
    readonly clock: EventQueue,
    /** The backoff's jitter (seeded: a run is the same on any host). */
    readonly random: () => number,
  ) {}

  /** Send one request now; the returned function takes it back (the client leaves): false when it had already ended. */
  send(o: TwinRequestOptions): () => boolean {
    const r = new TwinRequest(this, o);
    r.start();
    return () => r.cancel();
  }
}

type Phase = "admitting" | "opening" | "streaming" | "waiting" | "over";

class TwinRequest implements Evictable {
  private phase: Phase = "admitting";
  private readonly sentAt: number;
  private grant: TwinGrant | undefined;
  private engine: TwinEngine | undefined;
  private seq: Sequence | undefined;
  /** Bumped at each attempt: a token, an end or a deadline of an earlier one is ignored. */
  private attempt = 0;
  /** Attempts on this model so far (the budget of max_attempts), and those since the last break. */
  private tries = 0;
  private readonly exclude = new Set<number>();
  /** Endpoints whose stream of this request broke: never a continuation target. */
  private readonly spent = new Set<number>();
  private lastFailure: AttemptFailure | undefined;
  private lastAttemptTokenAt = NaN;
  private cancelQueued: (() => boolean) | undefined;
  /** The first prompt as an engine tokenized it (undefined before the first attempt opened). */
  private basePrompt: PromptTokens | undefined;
  /** The sequence whose tokens the client has, and how many of its ids (its prompt's and its delivered tokens'): what a continuation resends. */
  private context: { seq: Sequence; len: number } | undefined;
  /** A continuation is being opened (counted as a recovery at its first token). */
  private continuing = false;
  private readonly answer: TwinAnswer = { status: 0, firstAt: NaN, lastAt: NaN, tokens: 0, promptTokens: 0, retries: 0, recoveries: 0 };

  constructor(
    private readonly rs: TwinRequests,
    private readonly o: TwinRequestOptions,
  ) {
    this.sentAt = rs.clock.now;
  }

  private get config() {
    return this.rs.gateway.config;
  }

  start(): void {
    const g = this.rs.gateway;
    g.budget.deposit();
    const cancel = g.admit(this.o.keys, (a) => {
      this.cancelQueued = undefined;
      if (this.phase === "over") {
        if (a.ok) g.release(a);
        return;
      }
      if (!a.ok) return this.end(a.code === "NO_READY_ENDPOINT" ? 503 : 429, `HTTP ${a.code === "NO_READY_ENDPOINT" ? 503 : 429} ${a.code}`);
      this.open(a);
    });
    // Still admitting once admit returned: the request waits in its band's queue.
    if (this.phase === "admitting") this.cancelQueued = cancel;
  }

  /** The client leaves: the queue lets it go, or its engine stops generating. */
  cancel(): boolean {
    if (this.phase === "over") return false;
    if (this.cancelQueued !== undefined) {
      if (!this.cancelQueued()) return false;
      this.cancelQueued = undefined;
    }
    // An attempt the engine took has its stream's headers: the client saw a 200.
    const opened = this.phase === "opening" || this.phase === "streaming";
    this.leaveEngine();
    if (this.grant) this.releaseGrant({ kind: "neutral" });
    this.end(opened || this.answer.tokens > 0 ? 200 : 0, "unfinished: aborted at the end of the run");
    return true;
  }

  /** An attempt on a granted endpoint: a refused port fails at once; otherwise the engine takes it. */
  private open(grant: TwinGrant): void {
    const { rs } = this;
    this.grant = grant;
    this.tries++;
    const attempt = ++this.attempt;
    const engine = rs.engines[grant.index]!;
    this.engine = engine;
    this.answer.endpoint = engine.id;
    if (engine.down) return this.failed("connect");
    this.phase = "opening";
    this.lastAttemptTokenAt = NaN;
    const ctx = this.context;
    const prompt = ctx === undefined ? engine.prompt(this.o.prompt) : engine.continuation(ctx.seq.tokenIds(ctx.len));
    if (this.basePrompt === undefined) {
      this.basePrompt = prompt;
      this.answer.promptTokens = prompt.count;
    }
    const owed = this.o.maxTokens - this.answer.tokens;
    const seq = engine.submit(prompt, owed, {
      token: (_index, at) => {
        if (attempt === this.attempt) this.token(at);
      },
      finish: () => {
        if (attempt === this.attempt) this.finished();
      },
      // The process died: before this attempt's first token a failed attempt (retried), after it a broken stream (continued).
      broken: () => {
        if (attempt !== this.attempt) return;
        if (this.phase === "opening") this.failed("truncated");
        else this.broke("truncated", "cut");
      },
    });
    this.seq = seq;
    this.watch(attempt, rs.clock.now + this.deadlines.firstTokenMs);
  }

  private get deadlines() {
    return this.config.deadlines;
  }

  /** The first-token deadline, then the idle deadline after each token: one timer, moved on lazily. */
  private watch(attempt: number, at: number): void {
    const { clock } = this.rs;
    clock.at(at, () => {
      if (attempt !== this.attempt || (this.phase !== "opening" && this.phase !== "streaming")) return;
      if (this.phase === "opening") return this.failed("first_token_timeout");
      const due = this.lastAttemptTokenAt + this.deadlines.idleMs;
      if (due > clock.now) return this.watch(attempt, due);
      this.broke("idle_timeout", "stall");
    });
  }

  private token(at: number): void {
    const a = this.answer;
    if (this.phase === "opening") {
      // The stream opened: the attempt loop hands it to the relay, and the endpoint answered.
      this.phase = "streaming";
      const g = this.grant!;
      const { breakers } = this.rs.gateway;
      breakers.success(g.index, I.CIRCUIT);
      if (g.circuit >= 0) breakers.success(g.index, g.circuit);
      if (a.tokens === 0) {
        this.rs.gateway.prefillDone(g);
        a.firstAt = at;
      }
      if (this.continuing) {
        this.continuing = false;
        a.recoveries++;
      }
      this.context = { seq: this.seq!, len: this.seq!.req.prompt.count };
      this.rs.gateway.evictions.enter(g.index, this);
      this.watch(this.attempt, at + this.deadlines.idleMs);
    }
    this.lastAttemptTokenAt = at;
    this.context!.len++;
    a.tokens++;
    a.lastAt = at;
    this.o.onToken(at);
  }

  private finished(): void {
    this.leaveStream();
    this.seq = undefined;
    this.releaseGrant({ kind: "neutral" });
    if (this.answer.tokens === 0) return this.end(200, "no token in the answer");
    this.end(200);
  }

  /** The fleet takes this stream's replica away past its grace period: the stream moves on (not the engine's fault). */
  evict(): void {
    if (this.phase !== "streaming") return;
    this.broke(undefined, "drained");
  }

  /** The attempt failed before its first token reached the client: retried elsewhere, within the loop's limits. */
  private failed(failure: AttemptFailure): void {
    this.leaveEngine();
    this.lastFailure = failure;
    this.exclude.add(this.grant!.index);
    this.spent.add(this.grant!.index);
    this.releaseGrant({ kind: "fault", failure });
    if (this.answer.tokens > 0) return this.continueOr(failure, "cut");
    this.retry();
  }

  /** The stream broke after its first token: continued, or the client gets the break. */
  private broke(failure: AttemptFailure | undefined, cause: BreakCause): void {
    this.leaveEngine();
    const g = this.grant!;
    this.spent.add(g.index);
    this.releaseGrant(failure === undefined ? { kind: "neutral" } : { kind: "fault", failure });
    this.tries = 0;
    this.continueOr(failure, cause);
  }

  private retry(): void {
    const { rs } = this;
    const { retry } = this.config;
    if (this.tries >= retry.maxAttempts || this.totalLeftMs() <= 0) return this.giveUp();
    if (!rs.gateway.budget.tryWithdraw(rs.clock.now)) return this.end(describeCode("RETRY_BUDGET_EXHAUSTED").status, "HTTP 503 RETRY_BUDGET_EXHAUSTED");
    this.answer.retries++;
    const backoff = retry.backoffMs * 2 ** Math.max(0, this.tries - 1) * rs.random();
    this.phase = "waiting";
    rs.clock.after(backoff >= 1 ? backoff : 0, () => {
      if (this.phase !== "waiting") return;
      let grant = rs.gateway.reschedule(this.o.keys, this.exclude, true);
      // No other endpoint: the one that failed, when its failure class allows (no fallback model is left).
      if (grant === undefined && this.exclude.size > 0 && this.sameEndpointAllowed()) {
        this.exclude.clear();
        grant = rs.gateway.reschedule(this.o.keys, this.exclude, true);
      }
      if (grant === undefined) return this.giveUp();
      this.open(grant);
    });
  }

  private sameEndpointAllowed(): boolean {
    const policies: Readonly<Record<string, string>> = this.config.retry.sameEndpoint;
    const p = this.lastFailure === undefined ? "never" : (policies[this.lastFailure] ?? "never");
    return p === "before_fallback" || p === "last_resort";
  }

  /** A continuation on another endpoint, or the break's error to the client. */
  private continueOr(failure: AttemptFailure | undefined, cause: BreakCause): void {
    const { rs } = this;
    const cfg = this.config;
    const refuse = (why: string) => this.end(200, `stream broke (${cause}): ${why}`);
    if (!cfg.continuation.enabled) return refuse("continuation off");
    if (this.answer.recoveries >= cfg.continuation.maxRecoveries) return refuse("limit");
    if (this.tries >= cfg.retry.maxAttempts) return refuse("no_target");
    if (this.totalLeftMs() <= 0) return refuse("deadline");
    const exclude = new Set([...this.spent, ...this.exclude]);
    const grant = rs.gateway.reschedule(this.o.keys, exclude, true);
    if (grant === undefined) return refuse("no_target");
    if (!rs.gateway.budget.tryWithdraw(rs.clock.now)) {
      rs.gateway.release(grant);
      if (grant.probe >= 0) rs.gateway.breakers.abandon(grant.index, grant.probe);
      return refuse("retry_budget");
    }
    this.lastFailure = failure;
    this.continuing = true;
    this.open(grant);
  }

  private totalLeftMs(): number {
    return this.sentAt + this.deadlines.totalMs - this.rs.clock.now;
  }

  private giveUp(): void {
    const f = this.lastFailure ?? "connect";
    const code = FAILURE_CODE[f];
    this.end(describeCode(code).status, `HTTP ${describeCode(code).status} ${code}`);
  }

  /** The engine stops working on this request (a deadline or a break the gateway saw; a dead engine has nothing to stop). */
  private leaveEngine(): void {
    this.leaveStream();
    if (this.seq !== undefined && this.engine !== undefined && !this.engine.down) this.engine.abort(this.seq);
    this.seq = undefined;
  }

  /** The stream is no longer open on its endpoint: the fleet's eviction of that endpoint no longer reaches it. */
  private leaveStream(): void {
    if (this.phase === "streaming" && this.grant !== undefined) this.rs.gateway.evictions.leave(this.grant.index, this);
  }

  /** The attempt's hold on its endpoint ends, and its verdict goes to the circuits (as the Exchange's endAttempt). */
  private releaseGrant(verdict: { kind: "neutral" } | { kind: "fault"; failure: AttemptFailure }): void {
    const g = this.grant;
    if (g === undefined) return;
    this.grant = undefined;
    const { gateway, clock } = this.rs;
    gateway.breakers.attemptEnded(g, verdict, verdict.kind === "fault" ? probeTargetOf("completions", this.o.keys.model) : undefined);
    // As its own event: the engine may still be inside its step, and what the release lets flow may go to it.
    clock.at(clock.now, () => gateway.release(g));
  }

  private end(status: number, error?: string): void {
    if (this.phase === "over") return;
    this.phase = "over";
    this.attempt++;
    const a = this.answer;
    a.status = status;
    if (error !== undefined) a.error = error;
    this.o.done(a);
  }
}
