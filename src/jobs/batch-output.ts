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

const json = JSON.stringify;

/**
 * One line of the output (2xx) or error file. Bodies are stored as JSON text
 * and spliced in as they are (not parsed and re-serialised): the output
 * carries exactly what the engine answered.
 */
export function renderOutcome(batchId: string, o: LineOutcome, end: BatchEnd): { kind: "output" | "error"; line: string } {
  const head = `{"id":${json(batchRequestId(batchId, o.lineNo))},"custom_id":${json(o.customId)}`;
  const r = o.result;
  if (r === null) return { kind: "error", line: `${head},"response":null,"error":${json(UNRUN[end])}}\n` };
  const response = r.statusCode === null ? "null" : `{"status_code":${r.statusCode},"request_id":${json(r.requestId)},"body":${r.body ?? "null"}}`;
  const error = r.errorCode === null ? "null" : json({ code: r.errorCode, message: r.errorMessage ?? "" });
  return { kind: r.ok ? "output" : "error", line: `${head},"response":${response},"error":${error}}\n` };
}
