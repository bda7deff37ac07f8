/** OpenAI's File, Batch and list objects, rendered from llmgw's records (Unix seconds, null for what has not happened). */
import type { Batch, StoredFile } from "./job-types.ts";
import type { Page } from "./jobs-store.ts";

const seconds = (ms: number | null): number | null => (ms === null ? null : Math.floor(ms / 1000));

interface OpenAIFile {
  id: string;
  object: "file";
  bytes: number;
  created_at: number;
  filename: string;
  purpose: string;
  /** Deprecated by OpenAI but still sent; llmgw validates on upload, so a stored file is always processed. */
  status: "processed";
  status_details: null;
  expires_at: null;
}

export function fileObject(f: StoredFile): OpenAIFile {
  return {
    id: f.id,
    object: "file",
    bytes: f.bytes,
    created_at: seconds(f.createdAtMs)!,
    filename: f.filename,
    purpose: f.purpose,
    status: "processed",
    status_details: null,
    expires_at: null,
  };
}

export function batchObject(b: Batch): Record<string, unknown> {
  return {
    id: b.id,
    object: "batch",
    endpoint: b.endpoint,
    model: b.model,
    errors: b.errors === null ? null : { object: "list", data: b.errors },
    input_file_id: b.inputFileId,
    completion_window: b.completionWindow,
    status: b.status,
    output_file_id: b.outputFileId,
    error_file_id: b.errorFileId,
    created_at: seconds(b.createdAtMs),
    in_progress_at: seconds(b.inProgressAtMs),
    expires_at: seconds(b.expiresAtMs),
    finalizing_at: seconds(b.finalizingAtMs),
    completed_at: seconds(b.completedAtMs),
    failed_at: seconds(b.failedAtMs),
    expired_at: seconds(b.expiredAtMs),
    cancelling_at: seconds(b.cancellingAtMs),
    cancelled_at: seconds(b.cancelledAtMs),
    request_counts: { total: b.counts.total, completed: b.counts.completed, failed: b.counts.failed },
    usage: {
      input_tokens: b.counts.promptTokens,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: b.counts.completionTokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: b.counts.promptTokens + b.counts.completionTokens,
    },
    metadata: b.metadata,
    // llmgw's extension: why pending lines are not being sent (null while they run, or when nothing waits).
    llmgw: { waiting_reason: b.waitingReason, waiting_since: seconds(b.waitingSinceMs) },
  };
}

/** OpenAI's cursor page: `after` is the last id of the previous page. */
export function listObject<T extends { id: string }>(page: Page<T>, render: (item: T) => unknown): Record<string, unknown> {
  return {
    object: "list",
    data: page.items.map(render),
    first_id: page.items[0]?.id ?? null,
    last_id: page.items.at(-1)?.id ?? null,
    has_more: page.hasMore,
  };
}
