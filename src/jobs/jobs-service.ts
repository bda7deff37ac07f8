/**
 * The Files and Batches API, its batch runner and the idempotency records
 * inside `llmgw serve`: one bun:sqlite store in data_dir (llmgw.sqlite),
 * opened at start when a previous run left one — its batches resume, the
 * lines it had in flight are re-driven and the keys it held are freed — or
 * else on first use, so a gateway that never sees a batch or an
 * Idempotency-Key leaves data_dir alone (a read-only working directory stays
 * fine, as with the fleet manager). With shared stores (state.backend:
 * redis) it opens at start and frees nothing: other gateways may be running
 * those lines and holding those keys; a dead gateway's lapse with their leases.
 */
import type { Database } from "bun:sqlite";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Config } from "../config/types.ts";
import type { BatchLineOutcome } from "../metrics/names.ts";
import { LlmgwError } from "../shared/errors.ts";
import type { Logger } from "../shared/logger.ts";
import { BatchRunner, type SendLine } from "./batch-runner.ts";
import { UploadBudget } from "./file-upload.ts";
import { IdempotencyGate } from "./idempotency-gate.ts";
import { type IdempotencyStore, SqliteIdempotencyStore } from "./idempotency-store.ts";
import { WAIT_REASONS, type WaitReason } from "./job-types.ts";
import { createJobsRoutes, type JobsRouteHandler } from "./jobs-routes.ts";
import type { JobsStore } from "./jobs-store.ts";
import { SqliteJobsStore } from "./sqlite-jobs-store.ts";
import { filesDirOf, openStateDatabase, STATE_DB_FILE } from "./state-db.ts";
import { isStoreCorrupt } from "./storage-errors.ts";
import { WalCheckpointer } from "./wal-checkpoint.ts";

interface GatewayJobsDeps {
  config: Config;
  log: Logger;
  /** One batch line through the gateway's request path (serve/batch-line-send.ts). */
  send: SendLine;
  /** Is this pool's GPU capacity in sustained saturation now? */
  saturated: (pool: string) => boolean;
  /** The pool a model is admitted against. */
  poolOf: (model: string) => string;
  /** Whether the gateway serves a model (name or alias). */
  knownModel: (name: string) => boolean;
  /** Resolves once the gateway knows what it serves (every endpoint polled once, a fleet settled): the runner claims nothing before. Default: at once. */
  discovered?: () => Promise<void>;
  /** Several gateways: the stores they share; absent, the embedded one in data_dir. */
  shared?: { jobs: JobsStore; idempotency: IdempotencyStore };
}

/** The store and what runs over it, once open. */
export interface OpenJobs {
  routes: JobsRouteHandler;
  idempotency: IdempotencyGate;
  runner: BatchRunner;
}

const shuttingDown = () => new LlmgwError("NO_READY_ENDPOINT", "the gateway is shutting down");

const NO_LINES: Readonly<Record<BatchLineOutcome, number>> = Object.freeze({ completed: 0, failed: 0, retried: 0, waited: 0 });
const NO_WAITS: Readonly<Record<WaitReason, number>> = Object.freeze(Object.fromEntries(WAIT_REASONS.map((r) => [r, 0])) as Record<WaitReason, number>);

export class GatewayJobs {
  readonly #deps: GatewayJobsDeps;
  #opening: Promise<OpenJobs> | undefined;
  #open: (OpenJobs & { db: Database | undefined; checkpointer: WalCheckpointer | undefined }) | undefined;
  #stopped = false;
  /** Set once the store was found corrupt: files, batches and idempotency keys answer this until a restart. */
  #disabled: LlmgwError | undefined;
  /** Bytes all uploads may hold in memory, gateway-wide. */
  readonly #budget: UploadBudget;

  constructor(deps: GatewayJobsDeps) {
    this.#deps = deps;
    this.#budget = new UploadBudget(deps.config.batch.uploadMemoryBytes);
  }

  /**
   * At start: a store left by a previous run is opened now, so its batches
   * resume without waiting for a request. True when it was. A store that
   * cannot be opened does not stop the gateway: inference is served, jobs
   * answer 503 (see opened()).
   */
  async resume(): Promise<boolean> {
    // Shared: batches other gateways created may be waiting for hands.
    if (this.#deps.shared === undefined && !existsSync(join(this.#deps.config.dataDir, STATE_DB_FILE))) return false;
    try {
      await this.opened();
      return true;
    } catch {
      return false; // logged where it failed
    }
  }

  /** Whether the batch store is usable (llmgw_jobs_store_available): false once it was found corrupt. */
  get available(): boolean {
    return this.#disabled === undefined;
  }

  /**
   * The store and its users, opened on first call. An unusable data_dir is a
   * 500 naming it (and the next call tries again); a corrupt database a 503
   * JOBS_UNAVAILABLE until the gateway is restarted on a repaired one; once
   * stopping, a 503.
   */
  opened(): Promise<OpenJobs> {
    if (this.#stopped) return Promise.reject(shuttingDown());
    if (this.#disabled !== undefined) return Promise.reject(this.#disabled);
    this.#opening ??= this.#openNow().catch((err: unknown) => {
      this.#opening = undefined;
      throw err;
    });
    return this.#opening;
  }

  /** Stop the runner: lines in flight are aborted and go back to pending, re-driven by the next start on this data_dir. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#open === undefined) await this.#opening?.catch(() => undefined);
    await this.#open?.runner.stop();
    await this.#open?.checkpointer?.stop();
  }

  /** Close the store, once requests still finishing (their answers recorded for idempotency) are done. */
  close(): void {
    this.#open?.db?.close();
    this.#open = undefined;
  }

  /** Batch line attempts by outcome since start (llmgw_batch_lines_total). */
  lineStats(): Readonly<Record<BatchLineOutcome, number>> {
    return this.#open?.runner.lineStats ?? NO_LINES;
  }

  /** Batch lines put back to wait or retry since start, by reason (llmgw_batch_line_waits_total). */
  waitStats(): Readonly<Record<WaitReason, number>> {
    return this.#open?.runner.waitStats ?? NO_WAITS;
  }

  /** The memory budget uploads share (batch.upload_memory_bytes); transcription forms, held until answered, count against it too. */
  get uploadBudget(): UploadBudget {
    return this.#budget;
  }

  /** Bytes uploads in progress hold in memory (llmgw_upload_memory_bytes). */
  uploadBytesHeld(): number {
    return this.#budget.held;
  }

  /** Answers replayed from idempotency records since start. */
  replays(): number {
    return this.#open?.idempotency.replays ?? 0;
  }

  async #openNow(): Promise<OpenJobs> {
    const { config, log, shared } = this.#deps;
    let db: Database | undefined;
    let checkpointer: WalCheckpointer | undefined;
    let store: JobsStore;
    if (shared === undefined) {
      try {
        db = openStateDatabase(config.dataDir, { checkpointElsewhere: true });
        store = new SqliteJobsStore(db, filesDirOf(config.dataDir));
        checkpointer = new WalCheckpointer(join(config.dataDir, STATE_DB_FILE));
      } catch (err) {
        db?.close();
        void checkpointer?.stop();
        const why = err instanceof Error ? err.message : String(err);
        const path = join(resolve(config.dataDir), STATE_DB_FILE);
        if (isStoreCorrupt(err)) {
          log.error(
            { err: why, store: path },
            "THE BATCH STORE IS CORRUPT: files, batches and Idempotency-Key requests are refused with 503 JOBS_UNAVAILABLE; inference is served. To recover, stop the gateway, move the file aside (and its -wal and -shm files) and start again (see docs/jobs.md)",
          );
          this.#disabled = new LlmgwError(
            "JOBS_UNAVAILABLE",
            `the batch store (${path}) cannot be read: ${why}; files, batches and idempotency keys are off until it is repaired`,
            { retryAfterS: 60 },
          );
          throw this.#disabled;
        }
        log.error({ err: why, dataDir: resolve(config.dataDir) }, "cannot open the batch store");
        throw new LlmgwError(
          "INTERNAL_ERROR",
          `the batch and idempotency store cannot be opened in data_dir (${resolve(config.dataDir)}); see the gateway's log`,
        );
      }
    } else store = shared.jobs;
    const idempotencyStore = shared?.idempotency ?? new SqliteIdempotencyStore(db!);
    // One process per data directory: keys this gateway held when it died are free again (shared keys lapse with their locks).
    const freed = shared === undefined ? await idempotencyStore.releaseAllRunning() : 0;
    // A key is locked at most as long as a request may take (the longest total deadline).
    const lockMs = Math.max(config.deadlines.totalMs, ...config.models.map((m) => m.deadlines.totalMs));
    const idempotency = new IdempotencyGate(idempotencyStore, config.idempotency, { lockMs });
    const { send, saturated, poolOf, knownModel, discovered } = this.#deps;
    // Shared: looking for work costs a Redis call per gateway, so every sync interval (a batch created here wakes it at once).
    const tickMs = shared === undefined ? undefined : config.state.syncIntervalMs;
    const runner = new BatchRunner({
      store,
      send,
      limits: config.batch,
      saturated,
      poolOf,
      knownModel,
      reclaimOnStart: shared === undefined,
      tickMs,
      whenReady: discovered,
    });
    const routes = createJobsRoutes({
      store,
      knownModel,
      limits: config.batch,
      runner,
      budget: this.#budget,
      bodyReadTimeoutMs: config.bodyReadTimeoutMs,
      idempotency,
    });
    if (this.#stopped) {
      // stop() came while this was opening: it waits for this promise, so close here.
      await checkpointer?.stop();
      db?.close();
      throw shuttingDown();
    }
    // The routes answer at once; the runner starts once the gateway knows what it serves (a restart's lines are not sent into a model list still empty).
    runner.start().catch((err: unknown) => log.error({ err: err instanceof Error ? err.message : String(err) }, "the batch runner could not start"));
    this.#open = { routes, idempotency, runner, db, checkpointer };
    log.info({ store: shared === undefined ? resolve(config.dataDir) : "shared (redis)", idempotencyKeysFreed: freed }, "batch and idempotency store opened");
    return this.#open;
  }
}
