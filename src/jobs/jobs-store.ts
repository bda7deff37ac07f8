/**
 * The store behind the Files and Batches API, as small async interfaces so
 * that the embedded backend (bun:sqlite, file bytes on disk) and a shared one
 * (Redis) are interchangeable. Every read takes the tenant: another tenant's
 * id is simply absent. Every method is atomic on its own. Nothing here holds
 * a whole file or a whole batch in memory: file bytes are written and read
 * as streams, batch lines arrive in chunks, results are read in pages, and a
 * claim touches only the lines it claims.
 */
import type { Batch, BatchDoc, BatchLine, BatchStatus, ClaimedLine, LineOutcome, LineRecord, StoredFile } from "./job-types.ts";

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

/** Bytes of a new file on their way to storage. Nothing is visible until FileStore.putFile names it; abort() drops it. */
export interface ContentWriter {
  /** Resolves once the chunk is with storage (await each: that is the backpressure). STORAGE_FULL when there is no room. */
  write(chunk: Uint8Array): Promise<void>;
  /** Bytes written so far. */
  readonly bytes: number;
  abort(): Promise<void>;
}

/** A stored file's bytes, to send as a response body: a Blob (a file on disk, sent without passing through memory) or a stream. */
export interface FileContent {
  size: number;
  body: Blob | ReadableStream<Uint8Array>;
}

/** What a tenant stores (per-tenant quotas). */
export interface StorageUsage {
  bytes: number;
  files: number;
}

interface FileStore {
  /** Start writing the bytes of file `id`. */
  openContent(id: string): Promise<ContentWriter>;
  /** Store a file whose bytes `content` (from openContent(file.id)) holds; an existing id is replaced (output files are written again after a crash mid-finalisation). */
  putFile(file: StoredFile, content: ContentWriter): Promise<void>;
  getFile(tenant: string, id: string): Promise<StoredFile | undefined>;
  getFileContent(tenant: string, id: string): Promise<FileContent | undefined>;
  /** true when it existed (and belonged to the tenant). Frees its bytes first, so it works on a full disk. */
  deleteFile(tenant: string, id: string): Promise<boolean>;
  /** Newest first, or oldest first with order "asc". */
  listFiles(tenant: string, query: PageQuery & { order: "asc" | "desc"; purpose?: string }): Promise<Page<StoredFile>>;
  /** Bytes and files the tenant stores now. */
  usage(tenant: string): Promise<StorageUsage>;
}

export interface BatchStore {
  /**
   * The batch and its lines, which arrive in chunks (written as they come,
   * each chunk a short step so no writer waits long); the batch becomes
   * visible only with the last one, so nothing partial is ever seen. Lines
   * left by a create that did not finish are never visible.
   */
  createBatch(doc: BatchDoc, lines: AsyncIterable<readonly BatchLine[]> | Iterable<readonly BatchLine[]>): Promise<Batch>;
  getBatch(tenant: string, id: string): Promise<Batch | undefined>;
  /** Newest first. */
  listBatches(tenant: string, query: PageQuery): Promise<Page<Batch>>;
  /**
   * Batches the runner has work in (validating, in_progress, finalizing,
   * cancelling), oldest first, any tenant. A record that cannot be read
   * (corrupt) is marked failed with BATCH_RECORD_CORRUPT and left out: one
   * bad row fails its batch and no other.
   */
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
   * Record lines' results, each once: keyed by batch and line, a second
   * write is ignored. The runner hands over the results of a short spell
   * together, so that the embedded store writes them in one transaction.
   * Returns, for each record, whether this call recorded (and counted) it.
   */
  recordResults(batchId: string, records: readonly LineRecord[]): Promise<boolean[]>;
  /**
   * Embedded backend only, at start: every running line goes back to pending
   * (its runner was this process before a crash). A shared backend relies on
   * lease expiry instead and returns 0.
   */
  reclaimInFlight(): Promise<number>;
  /** Up to `limit` lines after line `afterLineNo`, with their results (or null), by line number, for the output files. */
  lineOutcomes(batchId: string, afterLineNo: number, limit: number): Promise<LineOutcome[]>;
}

export interface JobsStore extends FileStore, BatchStore {}
