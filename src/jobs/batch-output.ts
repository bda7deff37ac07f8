/** The output and error files of a finished batch, in OpenAI's batch output format (one JSON object per line). */
import { batchRequestId } from "./job-ids.ts";
import type { LineOutcome } from "./job-types.ts";

/** How the batch ended, which decides what lines that never ran say. */
export type BatchEnd = "completed" | "cancelled" | "expired";

/** OpenAI's codes for requests a batch never ran. */
const UNRUN: Record<BatchEnd, { code: string; message: string }> = {
  completed: { code: "batch_incomplete", message: "This request has no result." },
  cancelled: { code: "batch_cancelled", message: "This request was not executed because the batch was cancelled." },
  expired: { code: "batch_expired", message: "This request could not be executed before the completion window expired." },
};

export interface RenderedBatchFiles {
  /** Lines that got a 2xx answer. */
  output: string;
  outputLines: number;
  /** Lines with a non-2xx answer, a failure without one, or no run at all. */
  errors: string;
  errorLines: number;
}

const json = JSON.stringify;

/**
 * Bodies are stored as JSON text and spliced in as they are (not parsed and
 * re-serialised): the output carries exactly what the engine answered.
 */
export function renderBatchFiles(batchId: string, outcomes: readonly LineOutcome[], end: BatchEnd): RenderedBatchFiles {
  const out: string[] = [];
  const err: string[] = [];
  for (const o of outcomes) {
    const head = `{"id":${json(batchRequestId(batchId, o.lineNo))},"custom_id":${json(o.customId)}`;
    const r = o.result;
    if (r === null) {
      err.push(`${head},"response":null,"error":${json(UNRUN[end])}}\n`);
      continue;
    }
    const response = r.statusCode === null ? "null" : `{"status_code":${r.statusCode},"request_id":${json(r.requestId)},"body":${r.body ?? "null"}}`;
    const error = r.errorCode === null ? "null" : json({ code: r.errorCode, message: r.errorMessage ?? "" });
    (r.ok ? out : err).push(`${head},"response":${response},"error":${error}}\n`);
  }
  return { output: out.join(""), outputLines: out.length, errors: err.join(""), errorLines: err.length };
}
