/** The domain records of the Files and Batches API as llmgw stores them (times in ms; openai-objects.ts renders OpenAI's shapes). */

/** OpenAI's batch statuses. */
const BATCH_STATUSES = ["validating", "in_progress", "finalizing", "completed", "failed", "cancelling", "cancelled", "expired"] as const;
export type BatchStatus = (typeof BATCH_STATUSES)[number];

/** Statuses the runner still has work in. */
export const ACTIVE_STATUSES: readonly BatchStatus[] = ["validating", "in_progress", "finalizing", "cancelling"];

/** Endpoints a batch may target: the inference routes llmgw serves. */
export const BATCH_ENDPOINTS = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings"] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

export function isBatchEndpoint(url: string): url is BatchEndpoint {
  return (BATCH_ENDPOINTS as readonly string[]).includes(url);
}

/** `batch` for uploads; `batch_output` for the output and error files llmgw writes. */
export type FilePurpose = "batch" | "batch_output";

export interface StoredFile {
  id: string;
  tenant: string;
  filename: string;
  purpose: FilePurpose;
  bytes: number;
  createdAtMs: number;
  /** Input files: the one endpoint and model every line targets (checked at upload). */
  endpoint: string | null;
  model: string | null;
  lineCount: number;
}

/** Why a batch with pending lines is not sending them right now (the `llmgw.waiting_reason` extension field; the closed set is a metric label too). */
import type { WaitReason } from "../metrics/names.ts";

export { WAIT_REASONS, type WaitReason } from "../metrics/names.ts";

interface BatchError {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}

interface BatchCounts {
  total: number;
  completed: number;
  failed: number;
  promptTokens: number;
  completionTokens: number;
}

/** Everything about a batch except its counters, which the store keeps apart so that recording a line result is one atomic increment. */
export interface BatchDoc {
  id: string;
  tenant: string;
  endpoint: BatchEndpoint;
  model: string | null;
  inputFileId: string;
  completionWindow: string;
  status: BatchStatus;
  createdAtMs: number;
  expiresAtMs: number;
  inProgressAtMs: number | null;
  finalizingAtMs: number | null;
  completedAtMs: number | null;
  failedAtMs: number | null;
  expiredAtMs: number | null;
  cancellingAtMs: number | null;
  cancelledAtMs: number | null;
  outputFileId: string | null;
  errorFileId: string | null;
  errors: BatchError[] | null;
  metadata: Record<string, string> | null;
  waitingReason: WaitReason | null;
  waitingSinceMs: number | null;
}

/** A new batch as created: `validating`, nothing happened yet. */
export function newBatchDoc(
  init: Pick<BatchDoc, "id" | "tenant" | "endpoint" | "model" | "inputFileId" | "completionWindow" | "createdAtMs" | "expiresAtMs" | "metadata">,
): BatchDoc {
  return {
    ...init,
    status: "validating",
    inProgressAtMs: null,
    finalizingAtMs: null,
    completedAtMs: null,
    failedAtMs: null,
    expiredAtMs: null,
    cancellingAtMs: null,
    cancelledAtMs: null,
    outputFileId: null,
    errorFileId: null,
    errors: null,
    waitingReason: null,
    waitingSinceMs: null,
  };
}

export interface Batch extends BatchDoc {
  counts: BatchCounts;
}

/** One request line of a batch, as parsed from the input file (1-based line numbers, as editors count). */
export interface BatchLine {
  lineNo: number;
  customId: string;
  method: "POST";
  url: BatchEndpoint;
  /** The request body, JSON text. */
  body: string;
}

export interface ClaimedLine extends BatchLine {
  batchId: string;
  /** Failed attempts so far (transient failures; saturation waits do not count). */
  attempts: number;
}

/** The recorded outcome of a line: an HTTP answer, or an error with no answer (none, when the batch ended before it ran). */
export interface LineResult {
  ok: boolean;
  statusCode: number | null;
  /** Response body, JSON text. */
  body: string | null;
  requestId: string | null;
  errorCode: string | null;
  errorMessage: string | null;
  promptTokens: number;
  completionTokens: number;
}

/** A line's result on its way to the store. */
export interface LineRecord {
  lineNo: number;
  result: LineResult;
}

/** A line at finalisation: its result, or none when it never finished. */
export interface LineOutcome {
  lineNo: number;
  customId: string;
  result: LineResult | null;
}
