/**
 * Drives batch lines through an injected `send` (the gateway's own request
 * path, in the batch band): bounded concurrency per batch and per tenant,
 * leases renewed while a line runs, results recorded once per (batch, line),
 * waits (never failures) while the capacity to run a line is not there
 * (saturation, rate limits, no ready endpoint), retries with backoff when an
 * engine fails, cancel and expiry as OpenAI documents them, and output files
 * at the end. It starts only once the gateway knows what it serves
 * (`whenReady`): lines resumed after a restart are not sent before the
 * endpoints' models are discovered.
 *
 * The store is touched in groups, not once a line (each write transaction
 * costs the event loop far more than the rows it writes): results are
 * written together (pending-results.ts), and a few lines are claimed ahead
 * of the free slots, so that a line that ends hands its slot straight to the
 * next one and the store sees one claim for several lines.
 */
import type { BatchConfig } from "../config/types.ts";
import { type AuditRecord, batchAuditRecord, writeAudit } from "../shared/audit.ts";
import { logger } from "../shared/logger.ts";
import { finalizeBatch } from "./batch-finalize.ts";
import type { BatchEnd } from "./batch-output.ts";
import { ClaimedAhead } from "./claimed-ahead.ts";
import { type Batch, type BatchStatus, type ClaimedLine, type LineResult, WAIT_REASONS, type WaitReason } from "./job-types.ts";
import type { JobsStore } from "./jobs-store.ts";
import { lineVerdict, type SendLine, type SendResult, usageOfResult } from "./line-send.ts";
import { PendingResults } from "./pending-results.ts";

export type { SendLine, SendResult } from "./line-send.ts";

interface BatchRunnerOptions {
  store: JobsStore;
  send: SendLine;
  limits: Pick<BatchConfig, "concurrencyPerBatch" | "concurrencyPerTenant" | "maxAttempts" | "retryBackoffMs" | "leaseMs">;
  /** Is this pool's GPU capacity saturated (sustained)? Its batches' pending lines then wait. Default: never. */
  saturated?: (pool: string) => boolean;
  /** The pool serving a model. Default: "default". */
  poolOf?: (model: string) => string;
  /** Re-checked when a batch leaves `validating`: a model gone since upload fails the batch. Default: all known. */
  knownModel?: (name: string) => boolean;
  /** One audit line per finished batch. Default: the log (`"msg":"audit"`). */
  audit?: (record: AuditRecord) => void;
  now?: () => number;
  /** This runner's identity on its leases. */
  owner?: string;
  /** How often to look again without being woken (backoffs ending, saturation clearing, expiry). */
  tickMs?: number;
  /** Embedded store (one process per data directory): re-drive every running line at start. */
  reclaimOnStart?: boolean;
  /** Resolves once the gateway knows what it serves (every endpoint polled once, a fleet settled): nothing is claimed before. */
  whenReady?: () => Promise<void>;
  /** How long a line's result may wait to be written together with others (pending-results.ts). */
  resultFlushMs?: number;
}

const DEFAULT_TICK_MS = 200;
const MAX_BACKOFF_MS = 60_000;
/** A batch waiting for capacity looks again at least this often (an engine back from a restart is used within seconds). */
const MAX_WAIT_MS = 10_000;

export class BatchRunner {
  readonly #o: BatchRunnerOptions;
  readonly #now: () => number;
  readonly #owner: string;
  readonly #audit: (record: AuditRecord) => void;
  /** batch id → line number → its abort controller. */
  readonly #inflight = new Map<string, Map<number, AbortController>>();
  readonly #tenantInflight = new Map<string, number>();
  readonly #settling = new Set<Promise<void>>();
  #dirty = false;
  #pumping: Promise<void> | undefined;
  #rotation = 0;
  #timers: ReturnType<typeof setInterval>[] = [];
  #running = false;
  #stopped = false;
  /** batch id → until when it sends nothing (a line was told "not now"), and how many waits in a row (the backoff grows with them). */
  readonly #paused = new Map<string, { untilMs: number; streak: number }>();
  /** Line attempts by outcome since start (the llmgw_batch_lines_total counter reads them). */
  readonly lineStats = { completed: 0, failed: 0, retried: 0, waited: 0 };
  /** Results not written yet; on a full disk they are kept here and written first once there is room: the line is not run again. */
  readonly #results: PendingResults;
  /** Lines claimed and not started yet. */
  readonly #ready: ClaimedAhead;
  /** How many lines to claim beyond the free slots of a batch. */
  readonly #ahead: number;
  /** The active batches as the last pass saw them. */
  #batches = new Map<string, Batch>();
  /** Lines put back to wait or retry, by reason (llmgw_batch_line_waits_total). */
  readonly waitStats: Record<WaitReason, number> = Object.fromEntries(WAIT_REASONS.map((r) => [r, 0])) as Record<WaitReason, number>;

  constructor(opts: BatchRunnerOptions) {
    this.#o = opts;
    this.#now = opts.now ?? Date.now;
    this.#owner = opts.owner ?? `runner-${process.pid}-${crypto.randomUUID()}`;
    this.#audit = opts.audit ?? writeAudit;
    this.#results = new PendingResults(opts.store, () => this.wake(), { flushMs: opts.resultFlushMs });
    this.#ready = new ClaimedAhead(opts.store, this.#owner, this.#now);
    // Enough to hand slots on between two passes (a flush or a tick), few enough that other runners sharing the store are not kept waiting.
    this.#ahead = Math.ceil(opts.limits.concurrencyPerBatch / 4);
  }

  /** Resolves once running: after `whenReady`, and after the reclaim of an embedded store. */
  async start(): Promise<void> {
    if (this.#running || this.#stopped) return;
    await this.#o.whenReady?.();
    if (this.#running || this.#stopped) return;
    this.#running = true;
    if (this.#o.reclaimOnStart) {
      const n = await this.#o.store.reclaimInFlight();
      if (n > 0) logger().info({ lines: n }, "batch lines in flight at the last stop are re-driven");
    }
    const renew = () => void this.#o.store.renewLeases(this.#owner, this.#now() + this.#o.limits.leaseMs).catch(logError("renewing leases"));
    this.#timers = [setInterval(() => this.wake(), this.#o.tickMs ?? DEFAULT_TICK_MS), setInterval(renew, Math.max(100, this.#o.limits.leaseMs / 3))];
    this.wake();
  }

  /** Stop claiming, abort what runs (those lines go back to pending) and wait until every line is settled. */
  async stop(): Promise<void> {
    this.#running = false;
    this.#stopped = true;
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    for (const lines of this.#inflight.values()) for (const ac of lines.values()) ac.abort(new Error("batch runner stopping"));
    await this.#pumping;
    await Promise.all([...this.#settling]);
    // Results in hand are written and lines claimed ahead go back, so that nothing waits for a lease to lapse.
    this.#results.stop();
    await this.#flushResults().catch(logError("writing batch results"));
    for (const id of this.#ready.batchIds()) await this.#ready.release(id).catch(logError("releasing lines claimed ahead"));
  }

  /** Look at the batches now (a batch was created or cancelled, or a line finished). */
  wake(): void {
    if (!this.#running) return;
    this.#dirty = true;
    if (this.#pumping !== undefined) return;
    this.#pumping = (async () => {
      while (this.#dirty && this.#running) {
        this.#dirty = false;
        try {
          await this.#pump();
        } catch (err) {
          logError("driving batches")(err);
        }
      }
      this.#pumping = undefined;
    })();
  }

  /** Lines of this batch running here now. */
  inflight(batchId: string): number {
    return this.#inflight.get(batchId)?.size ?? 0;
  }

  async #pump(): Promise<void> {
    // A write of results is due, or the last one was refused (a full disk: then nothing new is sent until it goes through).
    if ((this.#results.due || this.#results.blocked) && !(await this.#flushResults())) return;
    const batches = await this.#o.store.activeBatches();
    this.#batches = new Map(batches.map((b) => [b.id, b]));
    // Lines claimed ahead for a batch that is no longer active (ended, or failed as corrupt) go back.
    for (const id of this.#ready.batchIds()) if (!this.#batches.has(id)) await this.#ready.release(id);
    if (batches.length === 0) return;
    // Start each pass at another batch, so tenants and batches take turns at free slots.
    const start = this.#rotation++ % batches.length;
    for (let i = 0; i < batches.length && this.#running; i++) await this.#drive(batches[(start + i) % batches.length]!);
  }

  async #drive(b: Batch): Promise<void> {
    const now = this.#now();
    const running = this.inflight(b.id);
    switch (b.status) {
      case "validating":
        return this.#validate(b, now);
      case "cancelling":
        if (running === 0) await this.#finish(b, "cancelled", ["cancelling"]);
        return;
      case "finalizing":
        if (running === 0) await this.#finish(b, "completed", ["finalizing"]);
        return;
      case "in_progress":
        break;
      default:
        return;
    }
    if (now >= b.expiresAtMs) {
      // OpenAI: unfinished requests of an expired batch are cancelled; finished ones are in the output file.
      for (const ac of this.#inflight.get(b.id)?.values() ?? []) ac.abort(new Error("batch expired"));
      if (running === 0) await this.#finish(b, "expired", ["in_progress"]);
      return;
    }
    if (running === 0 && b.counts.completed + b.counts.failed >= b.counts.total) {
      await this.#finish(b, "completed", ["in_progress"]);
      return;
    }
    if (this.#o.saturated?.(this.#poolOf(b))) {
      await this.#markWaiting(b, "gpu_saturated");
      return;
    }
    const paused = this.#paused.get(b.id);
    if (paused !== undefined && now < paused.untilMs) return;
    const free = this.#free(b);
    if (free <= 0) return;
    if (this.#ready.count(b.id) < free) {
      const claimed = await this.#o.store.claimLines(b.id, free + this.#ahead - this.#ready.count(b.id), this.#owner, now, now + this.#o.limits.leaseMs);
      this.#ready.add(b.id, claimed, this.#inflight.get(b.id)?.keys() ?? []);
    }
    // Slots counted again: a line that ended while claiming may have started one (#startNext).
    for (let line: ClaimedLine | undefined; this.#free(b) > 0 && (line = this.#ready.take(b.id)) !== undefined; ) this.#launch(b, line);
  }

  /** Slots this batch may fill now: its own bound and its tenant's. */
  #free(b: Batch): number {
    return Math.min(this.#o.limits.concurrencyPerBatch - this.inflight(b.id), this.#o.limits.concurrencyPerTenant - (this.#tenantInflight.get(b.tenant) ?? 0));
  }

  #poolOf(b: Batch): string {
    return (this.#o.poolOf ?? (() => "default"))(b.model ?? "");
  }

  /**
   * A line of this batch ended: the next line claimed ahead takes its slot at
   * once, when the batch (as the last pass saw it) may send. False when none
   * was started: a pass then looks at everything.
   */
  #startNext(batchId: string): boolean {
    const b = this.#batches.get(batchId);
    if (!this.#running || this.#results.blocked || b === undefined || this.#ready.count(batchId) === 0) return false;
    const now = this.#now();
    if (b.status !== "in_progress" || now >= b.expiresAtMs || now < (this.#paused.get(b.id)?.untilMs ?? 0)) return false;
    if (this.#free(b) <= 0 || this.#o.saturated?.(this.#poolOf(b))) return false;
    this.#launch(b, this.#ready.take(batchId)!);
    return true;
  }

  async #validate(b: Batch, now: number): Promise<void> {
    const known = this.#o.knownModel ?? (() => true);
    if (b.model !== null && !known(b.model)) {
      const error = { code: "model_not_found", message: `The model '${b.model}' is not served by this gateway.`, param: "body.model", line: 1 };
      const failed = await this.#o.store.updateBatch(b.id, ["validating"], { status: "failed", failedAtMs: now, errors: [error] });
      if (failed) this.#audit(batchAuditRecord(failed, now));
      return;
    }
    await this.#o.store.updateBatch(b.id, ["validating"], { status: "in_progress", inProgressAtMs: now });
    this.wake();
  }

  #launch(b: Batch, line: ClaimedLine): void {
    const ac = new AbortController();
    let lines = this.#inflight.get(b.id);
    if (!lines) this.#inflight.set(b.id, (lines = new Map()));
    lines.set(line.lineNo, ac);
    this.#tenantInflight.set(b.tenant, (this.#tenantInflight.get(b.tenant) ?? 0) + 1);
    const settled = this.#run(b, line, ac.signal)
      .catch(logError(`batch ${b.id} line ${line.lineNo}`))
      .finally(() => {
        lines.delete(line.lineNo);
        if (lines.size === 0) this.#inflight.delete(b.id);
        const t = (this.#tenantInflight.get(b.tenant) ?? 1) - 1;
        if (t === 0) this.#tenantInflight.delete(b.tenant);
        else this.#tenantInflight.set(b.tenant, t);
        this.#settling.delete(settled);
        if (!this.#startNext(b.id)) this.wake();
      });
    this.#settling.add(settled);
  }

  async #run(b: Batch, line: ClaimedLine, signal: AbortSignal): Promise<void> {
    const { store } = this.#o;
    let res: SendResult;
    try {
      res = await this.#o.send({ method: line.method, url: line.url, body: line.body }, signal, {
        tenant: b.tenant,
        batchId: b.id,
        customId: line.customId,
        lineNo: line.lineNo,
      });
    } catch (err) {
      // Aborted (expiry, shutdown): not the line's fault, and it may run again.
      if (signal.aborted) return store.releaseLine(b.id, line.lineNo, this.#owner, this.#now(), false);
      const message = err instanceof Error ? err.message : String(err);
      return this.#retry(b, line, {
        ok: false,
        statusCode: null,
        body: null,
        requestId: null,
        errorCode: "request_failed",
        errorMessage: message,
        promptTokens: 0,
        completionTokens: 0,
      });
    }
    if (signal.aborted) return store.releaseLine(b.id, line.lineNo, this.#owner, this.#now(), false);
    const verdict = lineVerdict(res);
    if (verdict.kind === "wait") return this.#wait(b, line, verdict.reason, res.retryAfterS);
    const usage = usageOfResult(res);
    const ok = res.status >= 200 && res.status < 300;
    const result: LineResult = {
      ok,
      statusCode: res.status,
      body: res.body,
      requestId: res.requestId ?? null,
      errorCode: null,
      errorMessage: null,
      promptTokens: usage.prompt,
      completionTokens: usage.completion,
    };
    if (verdict.kind === "retry") return this.#retry(b, line, result);
    this.#results.add(b, line.lineNo, result);
    if (ok) {
      this.#paused.delete(b.id);
      if (b.waitingReason !== null) await this.#markWaiting(b, null);
    }
  }

  /**
   * Not now (saturation, a rate limit, no ready endpoint): the line goes back
   * without spending an attempt and the whole batch holds off — its other
   * lines would only be refused the same way — for Retry-After, or a backoff
   * that doubles with each wait in a row (at most MAX_WAIT_MS). The batch
   * says why.
   */
  async #wait(b: Batch, line: ClaimedLine, reason: WaitReason, retryAfterS: number | undefined): Promise<void> {
    // Lines refused together (the same pause) count as one wait in the streak.
    const prev = this.#paused.get(b.id);
    const streak = prev === undefined ? 1 : this.#now() < prev.untilMs ? prev.streak : prev.streak + 1;
    const backoff = Math.min(MAX_WAIT_MS, this.#o.limits.retryBackoffMs * 2 ** Math.min(streak - 1, 16));
    const delay = retryAfterS !== undefined ? Math.min(MAX_WAIT_MS, retryAfterS * 1000) : backoff;
    const untilMs = this.#now() + delay;
    this.#paused.set(b.id, { untilMs: Math.max(untilMs, prev?.untilMs ?? 0), streak });
    await this.#o.store.releaseLine(b.id, line.lineNo, this.#owner, untilMs, false);
    this.lineStats.waited++;
    this.waitStats[reason]++;
    await this.#markWaiting(b, reason);
  }

  /** The engine failed the line (a 5xx, a broken answer, a deadline): run it again after a backoff, or record the failure once attempts are spent. */
  async #retry(b: Batch, line: ClaimedLine, result: LineResult): Promise<void> {
    const attempts = line.attempts + 1;
    if (attempts >= this.#o.limits.maxAttempts) return this.#results.add(b, line.lineNo, result);
    this.lineStats.retried++;
    this.waitStats.engine_error++;
    const backoff = Math.min(MAX_BACKOFF_MS, this.#o.limits.retryBackoffMs * 2 ** (attempts - 1));
    await this.#o.store.releaseLine(b.id, line.lineNo, this.#owner, this.#now() + backoff, true);
    await this.#markWaiting(b, "engine_error");
  }

  /**
   * Write the results in hand; true when none is left. On a full disk they
   * stay in hand (the batch says storage_full) and no new line is sent until
   * they are written: the lines are not run again.
   */
  async #flushResults(): Promise<boolean> {
    if (this.#results.size === 0) return true;
    const out = await this.#results.flush((r) => this.lineStats[r.ok ? "completed" : "failed"]++);
    if (out.storageFull) this.waitStats.storage_full += out.newlyRefused;
    for (const b of out.storageFull ? out.held : []) await this.#markWaiting(b, "storage_full").catch(() => {});
    for (const b of out.written) if (b.waitingReason === "storage_full") await this.#markWaiting(b, null).catch(() => {});
    return out.ok;
  }

  async #markWaiting(b: Batch, reason: WaitReason | null): Promise<void> {
    if (b.waitingReason === reason) return;
    if (reason === null) this.#paused.delete(b.id);
    const updated = await this.#o.store.updateBatch(b.id, ["in_progress"], { waitingReason: reason, waitingSinceMs: reason === null ? null : this.#now() });
    // The pump's copy is stale until the next pass; keep it current so a burst of refusals writes once.
    if (updated) b.waitingReason = reason;
  }

  async #finish(b: Batch, end: BatchEnd, from: readonly BatchStatus[]): Promise<void> {
    // Results in hand first: the output files are made from what the store holds.
    if (!(await this.#flushResults())) return;
    await this.#ready.release(b.id);
    const now = this.#now();
    const done = await finalizeBatch(this.#o.store, b, end, from, now);
    if (done) this.#audit(batchAuditRecord(done, now));
  }
}

function logError(what: string): (err: unknown) => void {
  return (err) => logger().error({ err: err instanceof Error ? err.message : String(err) }, `batch runner: ${what} failed`);
}
