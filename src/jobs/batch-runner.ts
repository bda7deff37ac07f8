/**
 * Drives batch lines through an injected `send` (the gateway's own request
 * path, in the batch band): bounded concurrency per batch and per tenant,
 * leases renewed while a line runs, results recorded once per (batch, line),
 * waits (never failures) under GPU saturation and rate limits, cancel and
 * expiry as OpenAI documents them, and output files at the end.
 */
import type { BatchConfig } from "../config/types.ts";
import { batchAuditRecord, writeAudit, type AuditRecord } from "../shared/audit.ts";
import { logger } from "../shared/logger.ts";
import { finalizeBatch } from "./batch-finalize.ts";
import type { BatchEnd } from "./batch-output.ts";
import type { Batch, BatchStatus, ClaimedLine, LineResult, WaitReason } from "./job-types.ts";
import type { JobsStore } from "./jobs-store.ts";
import { usageOf, waitReasonOf, type SendLine, type SendResult } from "./line-send.ts";

export type { BatchLineRequest, SendLine, SendMeta, SendResult } from "./line-send.ts";

export interface BatchRunnerOptions {
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
}

const DEFAULT_TICK_MS = 200;
const MAX_BACKOFF_MS = 60_000;

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
  /** Line attempts by outcome since start (the llmgw_batch_lines_total counter reads them). */
  readonly lineStats = { completed: 0, failed: 0, retried: 0, waited: 0 };

  constructor(opts: BatchRunnerOptions) {
    this.#o = opts;
    this.#now = opts.now ?? Date.now;
    this.#owner = opts.owner ?? `runner-${process.pid}-${crypto.randomUUID()}`;
    this.#audit = opts.audit ?? writeAudit;
  }

  async start(): Promise<void> {
    if (this.#running) return;
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
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    for (const lines of this.#inflight.values()) for (const ac of lines.values()) ac.abort(new Error("batch runner stopping"));
    await this.#pumping;
    await Promise.all([...this.#settling]);
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
    const batches = await this.#o.store.activeBatches();
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
    const pool = (this.#o.poolOf ?? (() => "default"))(b.model ?? "");
    if (this.#o.saturated?.(pool)) {
      await this.#markWaiting(b, "gpu_saturated");
      return;
    }
    const free = Math.min(this.#o.limits.concurrencyPerBatch - running, this.#o.limits.concurrencyPerTenant - (this.#tenantInflight.get(b.tenant) ?? 0));
    if (free <= 0) return;
    const claimed = await this.#o.store.claimLines(b.id, free, this.#owner, now, now + this.#o.limits.leaseMs);
    for (const line of claimed) {
      // A lease of ours that lapsed while the line still runs here: it is not started twice.
      if (this.#inflight.get(b.id)?.has(line.lineNo)) continue;
      this.#launch(b, line);
    }
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
        this.wake();
      });
    this.#settling.add(settled);
  }

  async #run(b: Batch, line: ClaimedLine, signal: AbortSignal): Promise<void> {
    const { store } = this.#o;
    let res: SendResult;
    try {
      res = await this.#o.send({ method: line.method, url: line.url, body: JSON.parse(line.body) as unknown }, signal, {
        tenant: b.tenant,
        batchId: b.id,
        customId: line.customId,
        lineNo: line.lineNo,
      });
    } catch (err) {
      // Aborted (expiry, shutdown): not the line's fault, and it may run again.
      if (signal.aborted) return store.releaseLine(b.id, line.lineNo, this.#owner, this.#now(), false);
      const message = err instanceof Error ? err.message : String(err);
      return this.#transientFailure(b, line, { ok: false, statusCode: null, body: null, requestId: null, errorCode: "request_failed", errorMessage: message, promptTokens: 0, completionTokens: 0 });
    }
    const wait = waitReasonOf(res);
    if (wait !== undefined) {
      // Saturation and rate limits are transient: the line waits, the batch says why, nothing fails.
      const delay = res.retryAfterS !== undefined ? res.retryAfterS * 1000 : this.#o.limits.retryBackoffMs;
      await store.releaseLine(b.id, line.lineNo, this.#owner, this.#now() + delay, false);
      this.lineStats.waited++;
      return this.#markWaiting(b, wait);
    }
    const usage = usageOf(res.body);
    const ok = res.status >= 200 && res.status < 300;
    const result: LineResult = {
      ok,
      statusCode: res.status,
      body: JSON.stringify(res.body ?? null),
      requestId: res.requestId ?? null,
      errorCode: null,
      errorMessage: null,
      promptTokens: usage.prompt,
      completionTokens: usage.completion,
    };
    if (res.status >= 500) return this.#transientFailure(b, line, result);
    if (await store.recordResult(b.id, line.lineNo, result)) this.lineStats[ok ? "completed" : "failed"]++;
    if (ok && b.waitingReason !== null) await this.#markWaiting(b, null);
  }

  /** A 5xx or transport failure: run the line again after a backoff, or record the failure once attempts are spent. */
  async #transientFailure(b: Batch, line: ClaimedLine, result: LineResult): Promise<void> {
    const attempts = line.attempts + 1;
    if (attempts >= this.#o.limits.maxAttempts) {
      if (await this.#o.store.recordResult(b.id, line.lineNo, result)) this.lineStats.failed++;
      return;
    }
    this.lineStats.retried++;
    const backoff = Math.min(MAX_BACKOFF_MS, this.#o.limits.retryBackoffMs * 2 ** (attempts - 1));
    await this.#o.store.releaseLine(b.id, line.lineNo, this.#owner, this.#now() + backoff, true);
  }

  async #markWaiting(b: Batch, reason: WaitReason | null): Promise<void> {
    if (b.waitingReason === reason) return;
    const updated = await this.#o.store.updateBatch(b.id, ["in_progress"], { waitingReason: reason, waitingSinceMs: reason === null ? null : this.#now() });
    // The pump's copy is stale until the next pass; keep it current so a burst of refusals writes once.
    if (updated) b.waitingReason = reason;
  }

  async #finish(b: Batch, end: BatchEnd, from: readonly BatchStatus[]): Promise<void> {
    const now = this.#now();
    const done = await finalizeBatch(this.#o.store, b, end, from, now);
    if (done) this.#audit(batchAuditRecord(done, now));
  }
}

function logError(what: string): (err: unknown) => void {
  return (err) => logger().error({ err: err instanceof Error ? err.message : String(err) }, `batch runner: ${what} failed`);
}
