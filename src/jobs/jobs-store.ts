/**
 * The store behind the Files and Batches API, as small async interfaces so
 * that the embedded backend (bun:sqlite) and a shared one (Redis, issue 14)
 * are interchangeable. Every read takes the tenant: another tenant's id is
 * simply absent. Every method is atomic on its own.
 */
import type { Batch, BatchDoc, BatchLine, BatchStatus, ClaimedLine, LineOutcome, LineResult, StoredFile } from "./job-types.ts";

export interface PageQuery {
  /** Cursor: the id of the last item of the previous page. */
  after?: string;
  limit: number;
}

export interface Page<T> {
  items: T[];
  hasMore: boolean;
}

/** The cursor id names nothing this tenant can see. */
export class UnknownCursorError extends Error {
  constructor(readonly after: string) {
    super(`no object with id '${after}' to list after`);
    this.name = "UnknownCursorError";
  }
}

export interface FileStore {
  /** Store a file with its content; an existing id is replaced (output files are written again after a crash mid-finalisation). */
  putFile(file: StoredFile, content: Uint8Array): Promise<void>;
  getFile(tenant: string, id: string): Promise<StoredFile | undefined>;
  getFileContent(tenant: string, id: string): Promise<Uint8Array | undefined>;
  /** true when it existed (and belonged to the tenant). */
  deleteFile(tenant: string, id: string): Promise<boolean>;
  /** Newest first, or oldest first with order "asc". */
  listFiles(tenant: string, query: PageQuery & { order: "asc" | "desc"; purpose?: string }): Promise<Page<StoredFile>>;
}

export interface BatchStore {
  /** The batch and all its lines, in one step: nothing partial is ever visible. */
  createBatch(doc: BatchDoc, lines: readonly BatchLine[]): Promise<Batch>;
  getBatch(tenant: string, id: string): Promise<Batch | undefined>;
  /** Newest first. */
  listBatches(tenant: string, query: PageQuery): Promise<Page<Batch>>;
  /** Batches the runner has work in (validating, in_progress, finalizing, cancelling), oldest first, any tenant. */
  activeBatches(): Promise<Batch[]>;
  /**
   * Compare-and-set: apply `patch` only while the status is one of `from`.
   * Returns the updated batch, or undefined when it is absent or in another status.
   */
  updateBatch(id: string, from: readonly BatchStatus[], patch: Partial<Omit<BatchDoc, "id" | "tenant">>): Promise<Batch | undefined>;
  /**
   * Claim up to `max` lines for `owner` until `leaseUntilMs`: pending lines whose
   * backoff has passed, and running lines whose lease expired (their runner
   * died). Lowest line numbers first.
   */
  claimLines(batchId: string, max: number, owner: string, nowMs: number, leaseUntilMs: number): Promise<ClaimedLine[]>;
  /** Extend the leases of every line `owner` is running. */
  renewLeases(owner: string, leaseUntilMs: number): Promise<void>;
  /** Give a claimed line back: pending again after `notBeforeMs`, with one more failed attempt if `failedAttempt`. */
  releaseLine(batchId: string, lineNo: number, owner: string, notBeforeMs: number, failedAttempt: boolean): Promise<void>;
  /**
   * Record a line's result once: keyed by batch and line, a second write is
   * ignored. Returns true when this call recorded it (and counted it).
   */
  recordResult(batchId: string, lineNo: number, result: LineResult): Promise<boolean>;
  /**
   * Embedded backend only, at start: every running line goes back to pending
   * (its runner was this process before a crash). A shared backend relies on
   * lease expiry instead and returns 0.
   */
  reclaimInFlight(): Promise<number>;
  /** Every line with its result (or null), by line number, for the output files. */
  lineOutcomes(batchId: string): Promise<LineOutcome[]>;
}

export interface JobsStore extends FileStore, BatchStore {}
